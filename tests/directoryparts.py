"""Real directories the sign-in tests start: OpenLDAP's slapd and an OpenID Connect provider
(django-oidc-provider, a Django project of its own in tests/oidcprovider), each a process of
the test's own on a loopback port, with its data under a temporary directory.

Where slapd or the directory's libraries (python-ldap, django-auth-ldap: not in the dev
lock, since python-ldap builds from source) are not installed the LDAP tests skip (fail with
HIVE_REQUIRE_INTEGRATION=1): `apt-get install slapd ldap-utils`, and
`pip install --require-hashes -r requirements-directory.txt` after python-ldap's build
headers (`apt-get install build-essential libldap2-dev libsasl2-dev`).
"""

import importlib.util
import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.realparts import free_port, require

SLAPD = "/usr/sbin/slapd"
SCHEMAS = Path("/etc/ldap/schema")
ROOT = Path(__file__).resolve().parents[1]


def require_ldap_libraries() -> None:
    require(
        all(importlib.util.find_spec(name) for name in ("ldap", "django_auth_ldap")),
        "python-ldap and django-auth-ldap are not installed "
        "(pip install --require-hashes -r requirements-directory.txt)",
    )


def require_slapd() -> None:
    require_ldap_libraries()
    require(
        Path(SLAPD).exists() and shutil.which("ldapadd") is not None,
        "OpenLDAP's slapd and ldap-utils are not installed (apt-get install slapd ldap-utils)",
    )


def _wait_listening(port: int, proc: subprocess.Popen, log: Path, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{what} did not start listening: {log.read_text()}")


class Slapd:
    """slapd serving ``dc=lab,dc=test`` (posixAccount, posixGroup: the nis schema) at
    ldap://127.0.0.1:PORT, administered as ``cn=admin,dc=lab,dc=test``."""

    SUFFIX = "dc=lab,dc=test"
    ADMIN = "cn=admin,dc=lab,dc=test"
    ADMIN_PASSWORD = "admin-secret"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        (workdir / "db").mkdir(parents=True, exist_ok=True)
        self.config = workdir / "slapd.conf"
        self.config.write_text(self._config())
        self.log = workdir / "slapd.log"
        self.proc = None

    def _config(self) -> str:
        schemas = "\n".join(
            f"include {SCHEMAS / name}.schema"
            for name in ("core", "cosine", "nis", "inetorgperson")
        )
        return f"""{schemas}
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {self.workdir}/slapd.pid
argsfile {self.workdir}/slapd.args
database mdb
maxsize 10485760
suffix "{self.SUFFIX}"
rootdn "{self.ADMIN}"
rootpw {self.ADMIN_PASSWORD}
directory {self.workdir}/db
access to attrs=userPassword by self read by anonymous auth by * none
access to * by users read by * none
"""

    def start(self) -> "Slapd":
        # -d: stay in the foreground, a child of the test (so it is ended with it).
        self.proc = subprocess.Popen(
            [SLAPD, "-d", "0", "-h", f"{self.uri}/", "-f", str(self.config)],
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
        )
        _wait_listening(self.port, self.proc, self.log, "slapd")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def add(self, ldif: str) -> None:
        """Add entries (LDIF), as the directory's administrator, with ldapadd."""
        subprocess.run(
            ["ldapadd", "-x", "-H", self.uri, "-D", self.ADMIN, "-w", self.ADMIN_PASSWORD],
            input=ldif,
            text=True,
            capture_output=True,
            check=True,
        )


def person(uid: str, uid_number: int, password: str, *, gid_number: int = 100) -> str:
    """A person's entry (inetOrgPerson + posixAccount) under ou=people; their primary group
    (gidNumber) counts as a membership too (PosixGroupType), so it is none of the groups here."""
    return f"""dn: uid={uid},ou=people,{Slapd.SUFFIX}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {uid}
cn: {uid.title()} Lab
givenName: {uid.title()}
sn: Lab
mail: {uid}@lab.test
uidNumber: {uid_number}
gidNumber: {gid_number}
homeDirectory: /home/{uid}
loginShell: /bin/sh
userPassword: {password}

"""


def posix_group(name: str, gid_number: int, members: list[str]) -> str:
    lines = "".join(f"memberUid: {member}\n" for member in members)
    return f"""dn: cn={name},ou=groups,{Slapd.SUFFIX}
objectClass: posixGroup
cn: {name}
gidNumber: {gid_number}
{lines}
"""


BASE_LDIF = f"""dn: {Slapd.SUFFIX}
objectClass: dcObject
objectClass: organization
dc: lab
o: The lab

dn: ou=people,{Slapd.SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{Slapd.SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: cn=gpuhive,{Slapd.SUFFIX}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: gpuhive
userPassword: service-secret

"""


class OidcProvider:
    """A real OpenID Connect provider (django-oidc-provider) at http://127.0.0.1:PORT/openid/,
    with the people given (name → password, claims) and one confidential client."""

    CLIENT_ID = "gpuhive"
    CLIENT_SECRET = "client-secret"

    def __init__(self, workdir: Path, redirect_uri: str, people: dict):
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.people = workdir / "people.json"
        self.people.write_text(json.dumps(people))
        self.redirect_uri = redirect_uri
        self.log = workdir / "provider.log"
        self.proc = None

    def endpoint(self, name: str) -> str:
        return f"{self.url}/openid/{name}"

    def start(self) -> "OidcProvider":
        env = {
            **os.environ,
            "OIDC_TEST_DIR": str(self.workdir),
            "OIDC_TEST_SITE_URL": self.url,
            "OIDC_TEST_REDIRECT_URI": self.redirect_uri,
            "OIDC_TEST_CLIENT": f"{self.CLIENT_ID}:{self.CLIENT_SECRET}",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.oidcprovider.serve", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
        )
        _wait_listening(self.port, self.proc, self.log, "the OIDC provider")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


# --- Fixtures (imported by the tests that use them) ----------------------------------------

SETTINGS_FILE = ROOT / "hiveproject" / "settings.py"
SIGN_IN_SETTINGS = ("AUTH_LDAP_", "OIDC_", "HIVE_LDAP_", "HIVE_OIDC_", "HIVE_DIRECTORY_")
PEOPLE = f"ou=people,{Slapd.SUFFIX}"
GROUPS = f"ou=groups,{Slapd.SUFFIX}"
# The directory's people: uid → (uidNumber, password). Ordinary ones, root and a system account.
DIRECTORY_PEOPLE = {
    "ada": (2001, "pw-ada-directory"),
    "linus": (2002, "pw-linus-directory"),
    "root": (0, "pw-root-directory"),
    "daemonish": (500, "pw-daemonish-directory"),
    "AnonymousUser": (2003, "pw-anonymous-directory"),  # django-guardian's stand-in's name
}


@pytest.fixture(scope="module")
def lab_directory(tmp_path_factory):
    """A real slapd with the lab's people and groups (ml-lab: ada; vision: linus)."""
    require_slapd()
    server = Slapd(tmp_path_factory.mktemp("slapd")).start()
    try:
        people = "".join(person(uid, *entry) for uid, entry in DIRECTORY_PEOPLE.items())
        groups = posix_group("ml-lab", 5000, ["ada"]) + posix_group("vision", 5001, ["linus"])
        server.add(BASE_LDIF + people + groups)
        yield server
    finally:
        server.stop()


def configure(monkeypatch, settings, **env: str) -> None:
    """Put in force the sign-in settings that hiveproject/settings.py makes of ``env`` (the
    HIVE_* variables an admin sets), read by the settings file itself."""
    for name in list(os.environ):
        if name.startswith(("HIVE_LDAP_", "HIVE_OIDC_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    made = runpy.run_path(str(SETTINGS_FILE))
    for name, value in made.items():
        if name.startswith(SIGN_IN_SETTINGS) or name == "AUTHENTICATION_BACKENDS":
            setattr(settings, name, value)


def directory_env(server: Slapd, tmp_path: Path, **more: str) -> dict[str, str]:
    """The lab's directory as an admin would configure it: a service bind DN whose password
    is in a file, people and groups searched (posixGroup)."""
    password_file = tmp_path / "ldap-bind-password"
    password_file.write_text("service-secret\n")
    return {
        "HIVE_LDAP_SERVER_URI": server.uri,
        "HIVE_LDAP_BIND_DN": f"cn=gpuhive,{Slapd.SUFFIX}",
        "HIVE_LDAP_BIND_PASSWORD_FILE": str(password_file),
        "HIVE_LDAP_USER_SEARCH_BASE": PEOPLE,
        "HIVE_LDAP_GROUP_SEARCH_BASE": GROUPS,
        "HIVE_LDAP_GROUP_TYPE": "posixGroup",
        **more,
    }
