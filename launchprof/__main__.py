from launchprof.cli.entry import main

main()
