"""Field types of the definition and of the validated sets (matrix/), below both: the narrowest type for every
string and number, and the base model both build on.

A definition arrives through pull requests and ends up in root-run shell scripts, slurm.conf,
dnsmasq, iPXE, mkosi and sacctmgr files. So no free-text field is plain `str`: each one is a
pattern its consumer can carry without quoting tricks (DNS labels for anything that becomes a
host, switch or Slurm name, version patterns for versions, absolute paths with a safe alphabet
for paths on nodes), and numbers are finite and bounded by what the hardware or the software can
mean. The renderers quote again for their output language (quoting.py): the types make
hostile input a located schema error, quoting makes a missed case harmless.

Patterns are anchored ^...$ (pydantic's Rust regex engine: `$` is the end of the text, so a
trailing newline does not match), and no pattern admits a control character, a newline, a
quote, `$`, a backtick, `;`, `#` or whitespace unless said otherwise.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

# Unicode characters that change how text reads without being visible (bidi overrides and
# isolates, zero-width characters, line/paragraph separators, BOM), refused everywhere, as are
# C0/C1 control characters (newline and tab included): see validate/schema.py's text net.
INVISIBLE = frozenset(
    [chr(c) for c in range(0x00, 0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u061c", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029",
       "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2060", "\u2066", "\u2067",
       "\u2068", "\u2069", "\ufeff"])


# pattern -> what to write instead; validate/schema.py shows it as the finding's hint.
HINTS: dict[str, str] = {}


def _pattern(regex: str, max_length: int, hint: str = ""):
    if hint:
        HINTS[regex] = hint
    return StringConstraints(pattern=regex, max_length=max_length)


def visible(value: str) -> str:
    """Refuse control, bidi and zero-width characters (the text net for free-text fields)."""
    bad = next((c for c in value if c in INVISIBLE), None)
    if bad is not None:
        raise ValueError(f"contains the control or invisible character U+{ord(bad):04X}; "
                         "write plain text on one line")
    return value


# --- names -------------------------------------------------------------------------------------
# RFC 1123 label, lower case: host names, node names, Slurm partition/QOS/account/node-set names,
# Kubernetes namespaces and object names (DNS-1123 label), switch and block names, file names.
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
Name = Annotated[str, _pattern(rf"^{_LABEL}$", 63, "names are lower-case letters, digits and '-', start and end alphanumeric, at most 63 characters")]
HostName = Name
# A DNS name (dots between labels, at most 253 characters): domains, controller and database hosts.
Fqdn = Annotated[str, _pattern(rf"^{_LABEL}(\.{_LABEL})*$", 253, "write a DNS name: labels of lower-case letters, digits and '-' joined by dots (ctl1.lab.example)")]
# POSIX portable user name (useradd's default rule), as sacctmgr and PAM see it.
UserName = Annotated[str, _pattern(r"^[a-z_][a-z0-9_.-]{0,31}$", 32, "user names are lower-case letters, digits, '_', '.' and '-', starting with a letter or '_', at most 32")]
# Identifiers that are not DNS names but reach files: GPU model, platform id, set names.
Token = Annotated[str, _pattern(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$", 64, "use letters, digits, '.', '_', '+' and '-' only, starting with a letter or digit, at most 64")]
SetName = Token
# A Linux interface name (IFNAMSIZ - 1 = 15 characters).
InterfaceName = Annotated[str, _pattern(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$", 15, "an interface name is at most 15 letters, digits, '_', '.' or '-' (ibp0, eno1)")]
# Group names of an identity provider (Active Directory allows spaces): printable, no quotes.
GroupName = Annotated[str, _pattern(r"^[A-Za-z0-9_][A-Za-z0-9 _.@:=,/-]{0,254}$", 255, 'group names are letters, digits, spaces and _ . @ : = , / - (no quotes or control characters)')]

# --- Kubernetes metadata ------------------------------------------------------------------------
# Label/taint keys: optional DNS-subdomain prefix and '/', then a name of at most 63 characters;
# values: empty or the same name alphabet (apimachinery's IsQualifiedName / IsValidLabelValue).
_K8S_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
LabelKey = Annotated[str, _pattern(rf"^({_LABEL}(\.{_LABEL})*/)?{_K8S_NAME}$", 317, "a Kubernetes label key: optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.'")]
LabelValue = Annotated[str, _pattern(rf"^({_K8S_NAME})?$", 63, "a Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends")]
# An OCI repository prefix: registry host[:port] and path (nvcr.io/nvidia).
Registry = Annotated[str, _pattern(r"^[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?){0,8}$", 512, 'an image repository prefix such as nvcr.io/nvidia (lower case, no scheme)')]

# --- versions and packages ----------------------------------------------------------------------
# A version as written by its vendor: 580.82.07, 13.0.1, v25.3.4, 1.17.8, 25.05.3, 2.28.3-1
Version = Annotated[str, _pattern(r"^v?[0-9]{1,9}(\.[0-9]{1,9}){0,5}([.+~-][0-9A-Za-z.+~-]{1,64})?$", 96, 'write the version as the vendor does, e.g. 580.82.07 or v25.3.4')]
# A kernel release as `uname -r` prints it and Debian names its package: 6.8.0-60-generic.
KernelRelease = Annotated[str, _pattern(r"^[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,4})?([.+~-][0-9A-Za-z.+~_-]{1,64})?$", 96, 'write the kernel release as `uname -r` prints it, e.g. 6.8.0-60-generic')]
# A Debian package name (Debian Policy 5.6.1): lower case, digits, '+', '-', '.'; two or more.
DebPackage = Annotated[str, _pattern(r"^[a-z0-9][a-z0-9+.-]{1,99}$", 100, "a Debian package name: lower-case letters, digits, '+', '-' and '.', no version or options")]
# A distribution release code name (bookworm, noble).
Release = Annotated[str, _pattern(r"^[a-z][a-z0-9-]{0,31}$", 32, 'a release code name such as bookworm or noble')]
ImageVersion = Annotated[str, _pattern(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,63}$", 64, "use letters, digits, '.', '_' and '-' (2026.07.1)")]
# An Ansible role folder name of roles/ (gpu_facts): lower-case letters, digits and '_'.
RoleName = Annotated[str, _pattern(r"^[a-z][a-z0-9_]{0,62}$", 63, "a role name as in roles/: lower-case letters, digits and '_' (gpu_facts)")]
# The content hash of an image build as artefact names carry it: the first 12 hex digits of the
# sha256 of the rendered recipe (`clusterdef render -t images` prints it in images/<image>/identity).
ImageDigest = Annotated[str, _pattern(r"^[0-9a-f]{12}$", 12, "12 lower-case hex digits, as in the artefact name (3f9a0c1d2e4b)")]
# One kernel command-line argument: no whitespace (it would split), no quotes, no `$` (iPXE
# expands ${...} on its command lines), no `#`, `;`, `&`, `|` or backslash.
KernelArg = Annotated[str, _pattern(r"^[A-Za-z0-9_.,:=/@+%-]{1,255}$", 255, "one argument per item, without spaces, quotes, '$', ';' or '#' (console=ttyS0,115200n8)")]
# MIG profiles as nvidia-smi names them: 1g.10gb, 3g.40gb, 1g.24gb+me.
MigProfile = Annotated[str, _pattern(r"^[0-9]{1,2}g\.[0-9]{1,4}gb(\+[a-z]{1,8})?$", 32, 'a MIG profile as nvidia-smi names it, e.g. 1g.10gb or 3g.40gb')]

# InfiniBand port GUIDs of one host, `;`-separated (0x + 16 hex digits each), as ibstat prints them.
PortGuids = Annotated[str, _pattern(r"^0x[0-9a-f]{16}(;0x[0-9a-f]{16}){0,63}$", 1215, "port GUIDs are 0x and 16 lower-case hex digits, several joined by ';' (0x0002c90300a1b2c3;0x0002c90300a1b2c4)")]

# --- Slurm ----------------------------------------------------------------------------------------
# A TRES name as sacctmgr takes it: cpu, mem, node, billing, gres/gpu, gres/gpu:h100, license/x.
Tres = Annotated[str, _pattern(r"^[a-z]{1,16}(/[a-z0-9_]{1,32}(:[a-z0-9_]{1,32})?)?$", 82, 'a TRES name such as cpu, mem, node or gres/gpu (gres/gpu:h100 for one type)')]
# A slurm.conf key: letters and digits only (the parser's keys are identifiers).
SlurmKey = Annotated[str, _pattern(r"^[A-Za-z][A-Za-z0-9]{0,63}$", 64, 'a slurm.conf key is letters and digits only (e.g. MaxJobCount)')]
# A MySQL/MariaDB database name as slurmdbd's StorageLoc (unquoted identifier: letters, digits, '_').
DbName = Annotated[str, _pattern(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", 64, "a database name is letters, digits and '_', not starting with a digit, at most 64 (slurm_acct_db)")]
# A passthrough value: printable ASCII without quotes, `#` (a comment in slurm.conf) or backslash;
# spaces are allowed and the renderer double-quotes such a value.
SlurmValue = Annotated[str, _pattern(r'^[A-Za-z0-9 _.,:=/@%+*()<>\[\]{}~^!?-]{0,1024}$', 1024, "printable ASCII without quotes, '#' or backslash; spaces are allowed")]


def _absolute_path(value: str) -> str:
    parts = value.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{value!r} has an empty, '.' or '..' segment; write the plain absolute path")
    return value


def _relative_path(value: str) -> str:
    parts = value.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{value!r} must stay inside the definition's folder: no '..', '.' or empty segments")
    return value


# A path on the node or the server (absolute; letters, digits, '_', '.', '-', '+', '@' per segment).
AbsPath = Annotated[str, _pattern(r"^/[A-Za-z0-9_.+@/-]{1,4095}$", 4096, "an absolute path of letters, digits, '_', '.', '+', '@', '-' and '/' (/usr/sbin/nodecheck)"), AfterValidator(_absolute_path)]
# What a filesystem mount names (a GPFS device, `mgs@o2ib:/fs1` for Lustre, `server:/export` for NFS,
# `/dev/...` for XFS and btrfs); the per-kind shape is checked by `filesystem-source-invalid`.
MountSource = Annotated[str, _pattern(r"^[A-Za-z0-9/][A-Za-z0-9_.+@:,/-]{0,254}$", 255, "a mount source of letters, digits and _ . + @ : , / - (fs1, mgs@o2ib:/fs1, nfs1:/export, /dev/nvme0n1)")]
# A file beside the definition (relative to its folder, never above it).
RelPath = Annotated[str, _pattern(r"^[A-Za-z0-9_+@][A-Za-z0-9_.+@/-]{0,4095}$", 4096, "a path relative to the definition's folder, without '..' (inventory/macs.csv)"), AfterValidator(_relative_path)]

# One argument of a command a playbook runs as argv (no shell): printable ASCII without '{' and '}',
# so Ansible's templating never sees an expression in it (a definition string is data, not Jinja),
# and without '`', so the plan's Markdown shows it inside a code span it cannot leave.
CommandArg = Annotated[str, _pattern(r"^[\x20-\x5f\x61-\x7a|~]{1,1024}$", 1024, "printable ASCII without '{', '}' or '`', at most 1024 characters per argument (one argument per item)")]

# An apt repository URL: http(s) with a host name, or file: with an absolute path (a local stand-in
# repository); letters, digits and . _ ~ % + - : / only, so it goes into an apt sources line as is.
RepoUrl = Annotated[str, _pattern(r"^(https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?(/[A-Za-z0-9._~%+:-]*)*|file:(/[A-Za-z0-9._~%+-]+)+/?)$", 2048, "an apt repository URL such as http://repo.site.example/slurm/ (http, https or file:/path; no spaces, quotes or '$')")]

# Free text for humans (descriptions, site names): anything printable on one line; the text net
# refuses control and bidi characters, renderers write it only into comments after quoting.
Text = Annotated[str, StringConstraints(max_length=1024), AfterValidator(visible)]

# --- numbers ------------------------------------------------------------------------------------
# Upper bounds are generous but finite: large enough for any real estate, small enough that a
# typo (1e30) or a sign error cannot reach slurm.conf, qos.sh or a ResourceQuota.
MAX_GPUS = 1_000_000          # GPUs of one tenant or queue: far above the largest estates
MAX_TRES = 2**31 - 1          # sacctmgr stores TRES counts as 64-bit, but no sane limit is higher
MAX_WEIGHT = 2**32 - 1        # Slurm priority weights and QOS priorities are uint32
Gpus = Annotated[int, Field(ge=0, le=MAX_GPUS)]
TresCount = Annotated[int, Field(ge=0, le=MAX_TRES)]
Weight = Annotated[int, Field(ge=0, le=MAX_WEIGHT)]


class Model(BaseModel):
    """Every model is frozen, rejects unknown fields, and takes only finite numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False, defer_build=True)
