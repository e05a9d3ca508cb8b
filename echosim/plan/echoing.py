def echoing(*a, **k): raise NotImplementedError
