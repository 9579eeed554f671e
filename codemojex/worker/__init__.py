"""The worker process: the ScoreWorker on the lanes consumer pool, the outbox sender and the
round timer."""
