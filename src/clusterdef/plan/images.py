"""The image side of a plan: which builds change (identity old -> new), what changes inside them
(the apt pins of their recipes and their package lists), and the rules of image identity across
the two definitions:

- an image version belongs to one set: the same version built for another set is
  `image-version-reused` (located at the new definition's `images.<image>.version`);
- a stateless group's rollback is "point back and reboot", so the boot server must keep the
  rollback target's build: the new definition lists it in `images.<image>.published`
  (`image-rollback-not-kept`).

Both read only the two rendered trees (`images/<image>/identity`, the apt preferences) and the
two definitions: nothing is resolved again."""

from __future__ import annotations

from pathlib import PurePosixPath

from ..errors import Finding, Severity
from ..render.images import ImageIdentity, published_identity

PREFS = "mkosi.skeleton/etc/apt/preferences.d/"


def builds_of(tree: dict[str, str]) -> dict[str, ImageIdentity]:
    """image -> identity of its current build, read from the rendered `images/<image>/identity`."""
    out = {}
    for rel, text in tree.items():
        parts = PurePosixPath(rel).parts
        if len(parts) == 3 and parts[0] == "images" and parts[2] == "identity":
            kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
            out[parts[1]] = ImageIdentity(kv["image"], kv["version"], kv["set"], kv["digest"])
    return out


def pins_of(tree: dict[str, str], image: str) -> dict[str, str]:
    """package -> pinned apt version of one image, from its rendered apt preferences files."""
    root = f"images/{image}/{PREFS}"
    pins: dict[str, str] = {}
    for rel in sorted(r for r in tree if r.startswith(root)):
        for stanza in tree[rel].split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith("#"):
                    k, v = line.split(":", 1)
                    fields[k.strip()] = v.strip()
            if "Package" in fields and fields.get("Pin", "").startswith("version "):
                for pkg in fields["Package"].split():
                    pins[pkg] = fields["Pin"][len("version "):]
    return pins


def image_diff(old_tree: dict[str, str], new_tree: dict[str, str], old_def, new_def) -> list[dict]:
    """Per image of the new definition whose build changes: identities and the package diff."""
    ob, nb = builds_of(old_tree), builds_of(new_tree)
    out = []
    for name, build in nb.items():
        before = ob.get(name)
        if before == build:
            continue
        op, np_ = pins_of(old_tree, name) if before else {}, pins_of(new_tree, name)
        pins = [{"package": p, "from": op.get(p), "to": np_.get(p)} for p in sorted(set(op) | set(np_))
                if op.get(p) != np_.get(p)]
        oi = old_def.images.get(name)
        ni = new_def.images[name]
        opk = set(oi.packages) if oi else set()
        groups = [g for g, n in new_def.nodes.items() if n.image == name]
        out.append({"image": name, "from": before.to_json() if before else None, "to": build.to_json(),
                    "groups": groups,
                    "stateless_groups": [g for g in groups if new_def.nodes[g].provisioning == "stateless"],
                    "kernel": {"from": oi.kernel if oi else None, "to": ni.kernel},
                    "packages_added": sorted(set(ni.packages) - opk),
                    "packages_removed": sorted(opk - set(ni.packages)),
                    "pins": pins})
    return out


def kept_builds(definition, image: str, current: ImageIdentity) -> dict[str, ImageIdentity]:
    """version -> build the boot server keeps for `image` under `definition`."""
    out = {current.version: current}
    for version, entry in definition.images[image].published.items():
        out.setdefault(version, published_identity(image, version, entry))
    return out


def identity_findings(old, new, rollback_set: str, rebuilt: set[str]) -> list[Finding]:
    """Located errors in the new definition: an image version reused for another set, and a
    stateless group whose image is rebuilt while its rollback build would not be kept on the
    boot server."""
    src = new.result.source
    file = new.result.file

    def at(path: tuple) -> tuple[int, int]:
        return src.locate(path) if src else (0, 0)

    ob, nb = builds_of(old.tree), builds_of(new.tree)
    nd = new.definition
    findings = []
    for name, build in nb.items():
        before = ob.get(name)
        if before and before.version == build.version and before.set != build.set:
            path: tuple[str, ...] = ("images", name, "version")
            findings.append(Finding(
                "image-version-reused", Severity.ERROR, path,
                f"image `{name}` version {build.version} was built for set {before.set} ({before.artefact}); "
                f"the new definition builds the same version for set {build.set}",
                f"an image version belongs to one set: give the new build a new version (e.g. "
                f"{build.version}.1), and list {build.version} under images.{name}.published with set "
                f"{before.set} and digest {before.digest} so the boot server keeps it for rollback",
                file, *at(path)))
    for gname, g in nd.nodes.items():
        if g.provisioning != "stateless" or g.image not in nb or g.image not in rebuilt or not rollback_set:
            continue
        kept = kept_builds(nd, g.image, nb[g.image])
        before = ob.get(g.image)
        if before and before.set == rollback_set:
            ok = before in kept.values()  # rolling back to the running set: exactly the running build
        else:
            ok = any(b.set == rollback_set for b in kept.values())
        if ok:
            continue
        path = ("images", g.image, "published") if nd.images[g.image].published else ("images", g.image)
        # quoted: an all-digit digest pasted bare would be read as a number (and refused)
        want = (f'"{before.version}": {{set: "{before.set}", digest: "{before.digest}"}}'
                if before and before.set == rollback_set else f"a build of `{g.image}` for set {rollback_set}")
        findings.append(Finding(
            "image-rollback-not-kept", Severity.ERROR, path,
            f"node group `{gname}` is stateless and rolls back to set {rollback_set} by booting that set's build of "
            f"image `{g.image}`, which the new definition does not keep on the boot server"
            + (f" (the running build is {before.artefact})" if before else ""),
            f"add it under images.{g.image}.published: {want}", file, *at(path)))
    # one finding per image and code is enough
    seen, out = set(), []
    for f in findings:
        if (f.code, f.path) not in seen:
            seen.add((f.code, f.path))
            out.append(f)
    return out
