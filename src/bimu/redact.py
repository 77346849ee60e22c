"""Credentials out of everything bimu prints or stores: :func:`redact_url` for any URL or address that can
carry a password (study storages, scheduler addresses), :func:`redact_text` for messages that may quote one.

A password may sit in the user-info part (``postgresql://user:PASSWORD@host/db``) or in a query
parameter (``...?password=PASSWORD``, ``sslpassword=``, ``token=``...), and users often leave ``#``,
``?``, ``/``, ``@`` or ``&`` in it unencoded. Such characters break a standard URL parser; the rules
here follow how the database layer reads the URL (SQLAlchemy: the password runs from the first
``:`` after the user name to the ``@`` before the host) and, where a URL is ambiguous, hide more
rather than less: the user-info password runs to the *last* ``@`` of the URL, a query password to
the next ``&`` that starts another ``key=``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
"""What replaces a secret."""

SECRET_KEYS = ("password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "access_token",
               "auth_token", "api_key", "apikey")
"""Query (and ``key=value`` connection string) parameters whose value is a secret (any letter case)."""

_USERINFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/]*:)(?P<secret>.*)@", re.S)
_PARAM = re.compile(r"(?:^|(?<=[?&;\s]))(?:" + "|".join(SECRET_KEYS) + r")\s*=\s*"
                    r"(?P<secret>.*?)(?=[&;][^&;=\s]*=|\s|$)", re.I | re.S)


def _secret_spans(url: str) -> list[tuple[int, int]]:
    spans = []
    m = _USERINFO.match(url)
    if m and m.group("secret"):
        spans.append(m.span("secret"))
    for m in _PARAM.finditer(url):
        if m.group("secret") and not any(a <= m.start("secret") < b for a, b in spans):
            spans.append(m.span("secret"))
    return sorted(spans)


def redact_url(url: str | None) -> str | None:
    """``url`` with every password in it replaced by ``***`` (user-info and secret query parameters).

    >>> redact_url("postgresql://bimu:secret@127.0.0.1:5432/bimu")
    'postgresql://bimu:***@127.0.0.1:5432/bimu'
    >>> redact_url("postgresql://bimu:se#c?r/et@db-host/bimu")  # unencoded '#', '?', '/'
    'postgresql://bimu:***@db-host/bimu'
    >>> redact_url("postgresql://bimu@db-host/bimu?sslmode=require&password=s3cret")
    'postgresql://bimu@db-host/bimu?sslmode=require&password=***'
    >>> redact_url("sqlite:///runs/study.db"), redact_url(None)
    ('sqlite:///runs/study.db', None)
    """
    if url is None:
        return None
    url = str(url)
    out, last = [], 0
    for a, b in _secret_spans(url):
        out += [url[last:a], MASK]
        last = b
    return "".join(out) + url[last:]


def redact_text(text: str, *urls: str | None) -> str:
    """``text`` (an error message, say) with each of ``urls`` redacted, and each of their passwords (as
    written and percent-decoded, when longer than 3 characters) replaced wherever else it appears.

    >>> redact_text("could not parse 'mysql://u:p%40ss-word@h/db': bad 'p@ss-word'", "mysql://u:p%40ss-word@h/db")
    "could not parse 'mysql://u:***@h/db': bad '***'"
    """
    text = str(text)
    for url in urls:
        if not url:
            continue
        url = str(url)
        text = text.replace(url, redact_url(url))
        for a, b in _secret_spans(url):
            for secret in {url[a:b], unquote(url[a:b])}:
                if len(secret) > 3:
                    text = text.replace(secret, MASK)
    return text
