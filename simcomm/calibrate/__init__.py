"""Calibration: measure a real (or emulated) cluster, fit link classes, check predictions.

* :mod:`~simcomm.calibrate.fit` – robust α-β fit (Theil-Sen β, smallest-excess α), α-β-γ least squares,
  refusing bad data;
* :mod:`~simcomm.calibrate.accept` – line-rate bound, warnings (unsettled rounds, busy machine, self-check);
* :mod:`~simcomm.calibrate.check` – ``--check``: validate a record, replay it against the model;
* :mod:`~simcomm.calibrate.linkfile` – atomic, round-trip-checked link TOML;
* :mod:`~simcomm.calibrate.bench` / :mod:`~simcomm.calibrate.worker` – torch.distributed
  microbenchmarks (torch imported lazily, only inside ranks);
* :mod:`~simcomm.calibrate.launch` – start ranks locally or in an emulated cluster;
* :mod:`~simcomm.calibrate.predict` – what gloo really runs, priced by simcomm's flow engine;
* :mod:`~simcomm.calibrate.emulate` – network namespaces + tc as a cluster on one machine.
"""
