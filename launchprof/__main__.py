from launchprof.cli import main

main()
