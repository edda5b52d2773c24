"""The one way a configured URL is shown: without the secrets it may carry.

A TSA or witness URL may carry credentials in its userinfo (``https://user:pass@host/``) or
its query (``?apikey=...``); its fragment is never needed to tell endpoints apart. Wherever
such a URL reaches a log line, a metric, a status file or a reply, it goes through
``redact_url``: scheme, host, port and path are kept; the userinfo is dropped without a
marker; a query becomes ``?…`` and a fragment ``#…``, so the reader sees that something was
there but not what. ``redact_text`` does the same to every URL inside free text (an error
message that quotes one). Both are pure and total: text that does not parse as a URL is
replaced by ``<unparsable URL>`` rather than shown.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["FRAGMENT_MARK", "QUERY_MARK", "UNPARSABLE", "redact_text", "redact_url"]

QUERY_MARK = "…"
FRAGMENT_MARK = "…"
UNPARSABLE = "<unparsable URL>"

_URL = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*://[^\s"<>]+')  # to a space, a " or <>


def redact_url(url: str) -> str:
    """``url`` without userinfo; its query shown as ``?…`` and its fragment as ``#…``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return UNPARSABLE
    host = parts.netloc.rpartition("@")[2]
    if "@" in parts.path:  # no "//" before it: what looks like userinfo stayed in the path
        return UNPARSABLE
    query = QUERY_MARK if parts.query or "?" in url.partition("#")[0] else ""
    fragment = FRAGMENT_MARK if "#" in url else ""
    return urlunsplit((parts.scheme, host, parts.path, query, fragment))


def redact_text(text: str) -> str:
    """``text`` with every ``scheme://...`` URL in it passed through ``redact_url``."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text)
