"""Who is connecting: the PostgreSQL user is the analyst's name in the policy, the
password is the analyst's API key.

Two mechanisms. SCRAM-SHA-256 when the policy holds the analyst's SCRAM verifier
(``scram_sha256``, printed by ``dpsql keys create``): the key never crosses the wire.
Otherwise a cleartext password, checked with the HTTP door's ``Authenticator`` (SHA-256
digests, constant time) and accepted only over TLS or on a loopback connection, since
the key would otherwise travel readable. Either way the key must belong to the user
named at startup.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from dataclasses import dataclass

from scramp import ScramException, ScramMechanism

from proxy.errors import DPSQLError
from proxy.pgwire import codec
from proxy.pgwire.sqlstate import INVALID_AUTHORIZATION, INVALID_PASSWORD, WireError
from proxy.policy import Policy
from proxy.server.auth import Authenticator, Caller, readable_tables
from proxy.server.logs import PGWIRE_LOGGER

log = logging.getLogger(PGWIRE_LOGGER)

SCRAM = "SCRAM-SHA-256"
ITERATIONS = 4096
# libpq sends an empty SCRAM user name ("n=", the user travelled in the startup
# packet) which scramp refuses; it gets this stand-in, the signed text stays libpq's.
_SCRAM_USER = "dpsql"
# The longest password or SASL message read before authentication (bytes, length word
# included): an API key or a SCRAM message is far shorter, and a stranger's message
# is refused before it is buffered.
MAX_AUTH_MESSAGE = 8192


@dataclass(frozen=True)
class ScramVerifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @classmethod
    def parse(cls, text: str) -> ScramVerifier:
        """PostgreSQL's form: ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``."""
        _, rest = text.split("$", 1)
        head, keys = rest.split("$", 1)
        iterations, salt = head.split(":", 1)
        stored, server = keys.split(":", 1)
        return cls(
            int(iterations),
            base64.b64decode(salt),
            base64.b64decode(stored),
            base64.b64decode(server),
        )


def scram_verifier(key: str, iterations: int = ITERATIONS) -> str:
    """The verifier of an API key, in PostgreSQL's form (for the policy file)."""
    salt, stored, server, count = ScramMechanism(SCRAM).make_auth_info(
        key, iteration_count=iterations
    )
    b64 = base64.b64encode
    return f"{SCRAM}${count}:{b64(salt).decode()}${b64(stored).decode()}:{b64(server).decode()}"


def failed(user: str) -> WireError:
    return WireError(
        INVALID_PASSWORD,
        f'password authentication failed for user "{user}"',
        hint="the user is the analyst's name in the policy and the password its API key",
        severity="FATAL",
    )


class Gate:
    """Runs the authentication exchange of one connection."""

    def __init__(self, policy: Policy):
        self._policy = policy
        self._keys = Authenticator(policy)
        # As PostgreSQL for unknown roles: when analysts use SCRAM, an unknown user gets
        # a SCRAM exchange too (a salt stable per name, keys nobody holds) that fails like
        # a wrong key, so the first reply does not tell which names are analysts.
        self._mock_scram = any(a.scram_sha256 for a in policy.analysts)
        self._mock_secret = os.urandom(32)

    def caller_of(self, name: str) -> Caller | None:
        analyst = self._policy.analyst(name)
        if analyst is None:
            return None
        return Caller(analyst.name, analyst.role, readable_tables(self._policy, analyst))

    async def authenticate(self, stream: codec.PgStream, user: str, *, secure: bool) -> Caller:
        """``secure``: the connection is TLS or loopback, so a cleartext key is safe."""
        analyst = self._policy.analyst(user)
        if analyst is not None and analyst.scram_sha256:
            return await self._scram(stream, user, ScramVerifier.parse(analyst.scram_sha256))
        if analyst is None and self._mock_scram:
            return await self._scram(stream, user, self._mock_verifier(user))
        if not secure:
            raise WireError(
                INVALID_AUTHORIZATION,
                "dpsql refuses a cleartext password on a connection that is neither TLS "
                "nor loopback",
                hint="connect with sslmode=require (start dpsql with --tls-cert/--tls-key), "
                "or add the analyst's scram_sha256 verifier from `dpsql keys create`",
                severity="FATAL",
            )
        return await self._cleartext(stream, user)

    def _mock_verifier(self, user: str) -> ScramVerifier:
        salt = hashlib.sha256(self._mock_secret + user.encode("utf-8", "surrogateescape"))
        return ScramVerifier(ITERATIONS, salt.digest()[:16], os.urandom(32), os.urandom(32))

    async def _cleartext(self, stream: codec.PgStream, user: str) -> Caller:
        stream.write(codec.m.make_authentication_cleartext_password())
        await stream.drain()
        tag, payload = await stream.read_message(MAX_AUTH_MESSAGE)
        if tag != codec.Tags.PASSWORD:
            raise failed(user)
        key = payload.rstrip(b"\x00").decode("utf-8", "surrogateescape")
        try:
            caller = self._keys(f"Bearer {key}")
        except DPSQLError:
            raise failed(user) from None
        if caller.name != user:
            raise failed(user)
        return caller

    async def _scram(self, stream: codec.PgStream, user: str, verifier: ScramVerifier) -> Caller:
        def lookup(_name: str) -> tuple[bytes, bytes, bytes, int]:
            return verifier.salt, verifier.stored_key, verifier.server_key, verifier.iterations

        server = ScramMechanism(SCRAM).make_server(lookup)
        stream.write(codec.m.make_authentication_sasl([SCRAM]))
        await stream.drain()
        tag, payload = await stream.read_message(MAX_AUTH_MESSAGE)
        if tag != codec.Tags.PASSWORD:
            raise failed(user)
        mechanism, first = codec.m.parse_sasl_initial_response(payload)
        if mechanism != SCRAM:
            raise failed(user)
        try:
            _client_first(server, first.decode("utf-8"))
            stream.write(
                codec.m.make_authentication_sasl_continue(server.get_server_first().encode())
            )
            await stream.drain()
            tag, payload = await stream.read_message(MAX_AUTH_MESSAGE)
            if tag != codec.Tags.PASSWORD:
                raise failed(user)
            server.set_client_final(payload.decode("utf-8"))
            final = server.get_server_final()
        except (ScramException, UnicodeDecodeError, ValueError):
            log.info("SCRAM exchange failed for user %r", user)
            raise failed(user) from None
        stream.write(codec.m.make_authentication_sasl_final(final.encode()))
        caller = self.caller_of(user)
        if caller is None:  # pragma: no cover - a mock verifier's proof never matches
            raise failed(user)
        return caller


def _client_first(server: object, message: str) -> None:
    """Feed client-first to scramp; libpq leaves the user empty ("n="), which the RFC
    grammar forbids, so scramp sees a stand-in while the signed bare message stays as
    the client sent it."""
    fields = message.split(",")
    if len(fields) >= 3 and fields[2] == "n=":
        fields[2] = "n=" + _SCRAM_USER
        server.set_client_first(",".join(fields))  # type: ignore[attr-defined]
        server.client_first_bare = ",".join(message.split(",")[2:])  # type: ignore[attr-defined]
        return
    server.set_client_first(message)  # type: ignore[attr-defined]
