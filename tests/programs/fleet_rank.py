"""One torchrun worker that is kernelcheck itself (no shell in between): `torchrun ... fleet_rank.py ARGS`.

The rank named by KC_ODD_RANK runs with the variables of KC_ODD_ENV (K=V,K=V) set, as a node whose image
sets another dispatch variable would. Everything else is `python -m kernelcheck ARGS`.
"""

import os
import sys

if os.environ.get("LOCAL_RANK") == os.environ.get("KC_ODD_RANK"):
    for kv in filter(None, os.environ.get("KC_ODD_ENV", "").split(",")):
        k, _, v = kv.partition("=")
        os.environ[k] = v

from kernelcheck.cli.main import main

sys.argv[0] = "kernelcheck"
main()
