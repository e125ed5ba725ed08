"""kernelcheck's tests; the helpers (envs, kcfixtures, standin, fake_hub, kernel_repos, dockerfile,
groundtruth) are modules of this package."""
