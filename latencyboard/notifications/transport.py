"""One HTTP POST to a receiver, refusing addresses a notification must never reach.

Pure of Django. The host is resolved once, every address it resolves to is vetted, and the
request is sent to that vetted address (with the original Host header and TLS server name),
so a DNS answer that changes between the check and the connection cannot redirect it.
Only public unicast addresses are reachable: loopback, private, shared (CGNAT), link-local,
multicast and reserved ones are refused, whichever way they are written (IPv4-mapped, 6to4,
NAT64), unless an operator lists their network as allowed (a receiver inside the company
network). Cloud metadata services are refused even then. Redirects are never followed.

One wall-clock deadline bounds the whole exchange (DNS lookup, connect, TLS, request, status
line, headers and the excerpt of the answer): httpx's own timeout bounds each read, so a
receiver trickling a byte every few seconds would hold a worker for ever. A lookup past the
deadline is left to finish in a small pool of its own, never waited for.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import functools
import ipaddress
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import SplitResult, urlsplit

import httpx

from latencyboard.notifications.message import HttpMessage
from latencyboard.notifications.notice import Attempt, Verdict

BODY_LIMIT = 4096  # a receiver's answer is read this far, for the delivery log
EXCERPT_LIMIT = 200
USER_AGENT = "latencyboard-notifications/1"
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# Cloud metadata services (AWS, GCP, Azure on 169.254.169.254; AWS over IPv6; Alibaba Cloud).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Lookups run here, not in the event loop's default pool: closing the loop would wait for them.
_LOOKUPS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="notification-dns")


class BadNetworkError(ValueError):
    pass


def parse_networks(items: list[str]) -> tuple[IPNetwork, ...]:
    """Networks written as ``10.0.0.0/8`` or single addresses; raises :class:`BadNetworkError`."""
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in items)
    except ValueError as exc:
        raise BadNetworkError(str(exc)) from None


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refused_reason(address: IPAddress, allowed: tuple[IPNetwork, ...] = ()) -> str | None:
    """Why a notification may not go to ``address``, or None when it may: it must be a
    public unicast address, or lie in one of the ``allowed`` networks (never a metadata one)."""
    address = _embedded_ipv4(address)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if any(address.version == network.version and address in network for network in allowed):
        return None
    if address.is_link_local:
        return "a link-local address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return "not a unicast host address"
    # Private (RFC 1918, fc00::/7), shared (CGNAT's 100.64.0.0/10), documentation, benchmarking.
    if not address.is_global:
        return "a private or non-public address"
    return None


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def retry_after_s(value: str | None, now: dt.datetime) -> float | None:
    """A Retry-After header (delay in seconds, or an HTTP date) as seconds from ``now``."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


def verdict_for(status_code: int) -> Verdict:
    if 200 <= status_code < 300:
        return Verdict.DELIVERED
    if status_code == 429 or status_code >= 500:
        return Verdict.RETRY
    return Verdict.FAILED


def _seconds(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # The CA bundle named by SSL_CERT_FILE / SSL_CERT_DIR (a company CA), else certifi's.
    # The client itself ignores the environment: a proxy would defeat the address vetting.
    return httpx.create_ssl_context(trust_env=True)


async def _resolve(host: str, port: int) -> list[IPAddress]:
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    lookup = functools.partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    infos = await asyncio.get_running_loop().run_in_executor(_LOOKUPS, lookup)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _pinned_url(parts: SplitResult, address: IPAddress, port: int) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return parts._replace(netloc=f"{host}:{port}").geturl()


async def _excerpt(response: httpx.Response) -> str:
    """The start of the answer, on one line; reading stops at BODY_LIMIT."""
    read = b""
    async for chunk in response.aiter_raw():
        read += chunk
        if len(read) >= BODY_LIMIT:
            break
    text = " ".join(read[:BODY_LIMIT].decode("utf-8", "replace").split())
    return text[:EXCERPT_LIMIT]


async def _exchange(
    url: str,
    message: HttpMessage,
    headers: dict[str, str],
    extensions: dict[str, str],
    timeout_s: float,
) -> tuple[httpx.Response, str]:
    """POST and read the status, headers and (unless delivered) the excerpt of the answer."""
    async with (
        httpx.AsyncClient(
            timeout=timeout_s, verify=_tls_context(), trust_env=False, follow_redirects=False
        ) as client,
        client.stream(
            "POST", url, headers=headers, content=message.body, extensions=extensions
        ) as response,
    ):
        delivered = verdict_for(response.status_code) is Verdict.DELIVERED
        return response, "" if delivered else await _excerpt(response)


def post(
    target: str,
    message: HttpMessage,
    timeout_s: float,
    now: dt.datetime,
    allowed: tuple[IPNetwork, ...] = (),
) -> Attempt:
    """POST ``message`` to ``target`` once (no retries: the outbox retries) and judge it;
    ``allowed`` are the networks besides public addresses it may reach."""
    attempt = _attempt(target, message, timeout_s, now, allowed)
    try:
        return asyncio.run(asyncio.wait_for(attempt, timeout_s))
    except TimeoutError:
        return _timed_out(timeout_s)


def _timed_out(timeout_s: float) -> Attempt:
    return Attempt(Verdict.RETRY, None, f"timed out after {_seconds(timeout_s)} s")


async def _attempt(
    target: str,
    message: HttpMessage,
    timeout_s: float,
    now: dt.datetime,
    allowed: tuple[IPNetwork, ...],
) -> Attempt:
    parts = urlsplit(target)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    try:
        addresses = await _resolve(host, port)
    except (socket.gaierror, UnicodeError) as exc:
        return Attempt(Verdict.RETRY, None, f"could not resolve {host}: {exc}")
    for address in addresses:
        reason = refused_reason(address, allowed)
        if reason is not None:
            return Attempt(Verdict.FAILED, None, f"refused: {host} is {address}, {reason}")
    address = addresses[0]
    # identity: the answer is read raw, so no decoder can fail on it or inflate it.
    headers = {"User-Agent": USER_AGENT, "Host": parts.netloc, "Accept-Encoding": "identity"}
    headers.update(message.headers)
    extensions = {}
    if parts.scheme == "https" and literal_address(host) is None:
        extensions["sni_hostname"] = host
    started = time.monotonic()
    try:
        response, excerpt = await _exchange(
            _pinned_url(parts, address, port), message, headers, extensions, timeout_s
        )
    except httpx.TimeoutException:
        return _timed_out(timeout_s)
    except httpx.RequestError as exc:
        detail = f"could not reach {host}:{port}: {str(exc) or type(exc).__name__}"
        return Attempt(Verdict.RETRY, None, detail)
    verdict = verdict_for(response.status_code)
    elapsed = time.monotonic() - started
    detail = f"{response.status_code} {response.reason_phrase} after {elapsed:.2f} s"
    if 300 <= response.status_code < 400:
        location = response.headers.get("Location", "")
        detail += f"; redirects are not followed (Location: {location})"
    elif excerpt:
        detail += f": {excerpt}"
    retry_after = (
        retry_after_s(response.headers.get("Retry-After"), now)
        if verdict is Verdict.RETRY
        else None
    )
    return Attempt(verdict, response.status_code, detail, retry_after)
