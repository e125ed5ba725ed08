"""Data, not code: models, kernel packages, transformers regimes, known breakages, verified runs."""
