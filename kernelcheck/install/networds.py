"""A failed request to a release server in words a user reads at once ("no network: could not reach github.com"),
never the raw text of the HTTP library (`HTTPSConnectionPool(host=..., port=443): Max retries exceeded ...`)."""

from __future__ import annotations

import re
from urllib.parse import urlparse

_DNS = re.compile(r"Name or service not known|Temporary failure in name resolution|nodename nor servname|"
                  r"getaddrinfo failed|No address associated with hostname|Name does not resolve|NameResolutionError")


def unreachable(url: str, exc: BaseException, timeout_s: float) -> str:
    """Why `url` could not be asked, from the exception's type and text: no name lookup, no answer in time,
    a refused or failed connection, a TLS failure; each says "no network" or what else it is, and the host."""
    host = urlparse(url).hostname or "the release server"
    kind = type(exc).__name__
    text = str(exc)
    if "Timeout" in kind:
        return f"no network answer: {host} did not answer within {timeout_s:g} s"
    if "SSL" in kind:
        return f"no secure connection to {host} (TLS failed: a proxy or a missing CA certificate?)"
    if _DNS.search(text):
        return f"no network: {host} could not be looked up (DNS lookup failed)"
    if "Connection" in kind or "Connect" in text:
        return f"no network: could not connect to {host} (offline, or blocked by a firewall or proxy)"
    return f"could not ask {host}: {kind}"
