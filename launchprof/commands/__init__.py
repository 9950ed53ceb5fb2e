"""What each command of the ``launchprof`` command line does, below the option parsing
(:mod:`launchprof.cli`) and above the library (:mod:`launchprof.api`): ``analyze``
(:mod:`~launchprof.commands.analyze`, many traces: :mod:`~launchprof.commands.many`),
``profile`` (:mod:`~launchprof.commands.profile` with its warm-up, early analysis and runs
without nsys), ``compare``, ``check``, ``calibrate``, ``doctor``; each returns its exit
status (:class:`~launchprof.commands.outcome.Outcome`). Nothing is imported here: the
fast path of ``profile`` loads only what it needs."""
