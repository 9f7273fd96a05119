"""The manifest: every wheel and sdist ever published, the site's source of truth (``site/manifest.json``).

Publishing only appends to it; an entry is never dropped or rewritten, except that ``yank`` marks
it yanked. Serialisation is deterministic (sorted entries, sorted keys) so a site is reproducible.
"""

from __future__ import annotations

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "Entry",
    "SdistEntry",
    "Manifest",
    "load_manifest",
    "parse_manifest",
    "resolve_now",
]

import dataclasses
import datetime
import difflib
import json
import os
import re
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Optional, TypedDict, TypeVar, Union

import causal_conv1d_contract as contract
from causal_conv1d_contract import sdist as sdist_contract
from index_site.errors import IndexSiteError, ManifestError, Problem, PublishConflict
from index_site.sdists import SdistFile
from index_site.wheels import WheelFile

MANIFEST_FORMAT = 1
MANIFEST_NAME = "manifest.json"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_T = TypeVar("_T")
_E = TypeVar("_E", "Entry", "SdistEntry")


class SdistJSON(TypedDict):
    """One sdist of the manifest's ``sdists``, as written (and what a wheel's entry has too)."""

    filename: str
    version: str
    url: str
    sha256: str
    size: int
    requires_python: Optional[str]
    upload_time: str
    yanked: Union[bool, str]


class EntryJSON(SdistJSON):
    """One wheel of the manifest's ``files``, as written."""

    variant: str
    platforms: list[str]
    metadata_sha256: str


def resolve_now(value: Optional[str]) -> str:
    """The upload time to record for new wheels, as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC).

    ``value`` (from ``--now``) is a Unix time or an ISO 8601 date-time; without it,
    ``SOURCE_DATE_EPOCH`` is used when set, else the clock.
    """
    source = "--now"
    if value is None and os.environ.get("SOURCE_DATE_EPOCH"):
        value, source = os.environ["SOURCE_DATE_EPOCH"], "SOURCE_DATE_EPOCH"
    if value is None:
        moment = datetime.datetime.fromtimestamp(int(time.time()), datetime.timezone.utc)
    elif re.fullmatch(r"\d+", value.strip()):
        moment = datetime.datetime.fromtimestamp(int(value), datetime.timezone.utc)
    else:
        try:
            moment = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise IndexSiteError(
                f"Invalid {source} (expected a Unix time like 1767225600 or an ISO 8601 date-time "
                f"like 2026-01-01T00:00:00Z): {value!r}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).strftime(_TIME_FORMAT)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One published wheel."""

    filename: str
    variant: str
    version: str
    platforms: tuple  # tuple[str, ...]
    url: str  # relative to the site root (self-hosted, quoted) or absolute
    sha256: str
    size: int
    metadata_sha256: str  # sha256 of <url>.metadata (PEP 658)
    requires_python: Optional[str]
    upload_time: str  # YYYY-MM-DDTHH:MM:SSZ, recorded once, when first published
    yanked: Optional[str] = None  # None: not yanked; a string (maybe empty): the reason (PEP 592)

    @property
    def is_relative(self) -> bool:
        return not urllib.parse.urlsplit(self.url).scheme

    def to_json(self) -> EntryJSON:
        return {
            **_published_json(self),
            "variant": self.variant,
            "platforms": list(self.platforms),
            "metadata_sha256": self.metadata_sha256,
        }

    @classmethod
    def from_json(cls, data: object) -> Entry:
        """Validate one manifest entry; raises ValueError naming the bad field."""
        data, filename, name = _named(data, contract.parse_wheel_name, contract.InvalidWheelName)
        variant = _field(data, "variant", str)
        if variant != name.variant.name:
            raise ValueError(f"variant {variant!r} does not match the file name's {name.variant.name!r}")
        sha256, metadata_sha256 = _sha256(data, "sha256"), _sha256(data, "metadata_sha256")
        size, upload_time, yanked = _size(data), _upload_time(data), _yanked(data)
        platforms = _field(data, "platforms", list)
        if not all(isinstance(p, str) for p in platforms):
            raise ValueError(f"field 'platforms' must be a list of strings: {platforms!r}")
        return cls(
            filename=filename,
            variant=variant,
            version=_field(data, "version", str),
            platforms=tuple(platforms),
            url=_field(data, "url", str),
            sha256=sha256,
            size=size,
            metadata_sha256=metadata_sha256,
            requires_python=_optional_field(data, "requires_python", str),
            upload_time=upload_time,
            yanked=yanked,
        )


def _field(data: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    """``data[key]``, which must be a ``kind`` (a bool is no int); raises ValueError naming the field."""
    if key not in data:
        raise ValueError(f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ValueError(f"field {key!r} has the wrong type: {value!r}")
    return value


def _optional_field(data: Mapping[str, object], key: str, kind: type[_T]) -> Optional[_T]:
    """As :func:`_field`, and ``null`` is None."""
    if key in data and data[key] is None:
        return None
    return _field(data, key, kind)


def _named(data: object, parse: Callable[[str], _T], invalid: type[Exception]) -> tuple[dict[str, object], str, _T]:
    """(the entry, its file name, what ``parse`` reads from the name); ValueError for an entry that is no
    object, has no file name, or one that ``parse`` refuses (with ``invalid``)."""
    if not isinstance(data, dict):
        raise ValueError(f"entry is not an object: {data!r}")
    filename = _field(data, "filename", str)
    try:
        return data, filename, parse(filename)
    except invalid as exc:
        raise ValueError(str(exc)) from None


def _sha256(data: Mapping[str, object], key: str) -> str:
    value = _field(data, key, str)
    if not _SHA256_RE.match(value):
        raise ValueError(f"field {key!r} is not a sha256 hex digest: {value!r}")
    return value


def _size(data: Mapping[str, object]) -> int:
    size = _field(data, "size", int)
    if size < 0:
        raise ValueError(f"field 'size' is negative: {size!r}")
    return size


def _upload_time(data: Mapping[str, object]) -> str:
    upload_time = _field(data, "upload_time", str)
    try:
        datetime.datetime.strptime(upload_time, _TIME_FORMAT)
    except ValueError:
        raise ValueError(f"field 'upload_time' is not YYYY-MM-DDTHH:MM:SSZ: {upload_time!r}") from None
    return upload_time


def _yanked(data: Mapping[str, object]) -> Optional[str]:
    """PEP 592 from the manifest (absent or false: None; true: no reason given, "")."""
    yanked = data.get("yanked", False)
    if not isinstance(yanked, (bool, str)):
        raise ValueError(f"field 'yanked' must be false, true or a reason: {yanked!r}")
    return None if yanked is False else ("" if yanked is True else yanked)


def _published_json(e: Union[Entry, SdistEntry]) -> SdistJSON:
    """What every published file's entry says (the manifest writes its keys sorted)."""
    return {
        "filename": e.filename,
        "version": e.version,
        "url": e.url,
        "sha256": e.sha256,
        "size": e.size,
        "requires_python": e.requires_python,
        "upload_time": e.upload_time,
        # PEP 592: false, true (no reason given) or the reason
        "yanked": False if e.yanked is None else (e.yanked or True),
    }


@dataclasses.dataclass(frozen=True)
class SdistEntry:
    """One published sdist (listed on ``source/causal-conv1d/``, causal_conv1d_contract.sdist)."""

    filename: str
    version: str  # the public version; the file name says the same
    url: str  # relative to the site root (self-hosted, quoted) or absolute
    sha256: str
    size: int
    requires_python: Optional[str]
    upload_time: str
    yanked: Optional[str] = None

    @property
    def is_relative(self) -> bool:
        return not urllib.parse.urlsplit(self.url).scheme

    def to_json(self) -> SdistJSON:
        return _published_json(self)

    @classmethod
    def from_json(cls, data: object) -> SdistEntry:
        """Validate one ``sdists`` entry; raises ValueError naming the bad field."""
        data, filename, version = _named(data, sdist_contract.parse_sdist_name, sdist_contract.InvalidSdistName)
        if _field(data, "version", str) != version:
            raise ValueError(f"version {data['version']!r} does not match the file name's {version!r}")
        sha256 = _sha256(data, "sha256")
        size, upload_time, yanked = _size(data), _upload_time(data), _yanked(data)
        return cls(
            filename,
            version,
            _field(data, "url", str),
            sha256,
            size,
            _optional_field(data, "requires_python", str),
            upload_time,
            yanked,
        )


@dataclasses.dataclass(frozen=True)
class Manifest:
    """Every wheel published, plus entries that could not be read (kept verbatim, never dropped)."""

    entries: tuple = ()  # tuple[Entry, ...], sorted by filename
    unreadable: tuple = ()  # raw JSON values of entries that did not validate
    site_url: Optional[str] = None  # the public URL the site was last built for (--site-url)
    sdists: tuple = ()  # tuple[SdistEntry, ...], sorted by filename
    unreadable_sdists: tuple = ()  # raw JSON values of sdist entries that did not validate

    def by_name(self) -> dict[str, Entry]:
        return {e.filename: e for e in self.entries}

    def dumps(self) -> str:
        """Deterministic JSON with one file per line (readable, diffs well, fast to write)."""
        files = [e.to_json() for e in self.entries] + list(self.unreadable)
        head: dict[str, Union[int, str]] = {"format": MANIFEST_FORMAT, "project": contract.PROJECT_NAME}
        if self.site_url is not None:
            head["site_url"] = self.site_url
        lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in sorted(head.items())]
        body = ",\n".join("  " + json.dumps(f, sort_keys=True, ensure_ascii=False) for f in files)
        out = "{\n" + "\n".join(lines) + '\n "files": [\n' + body + ("\n" if files else "") + " ]"
        sdists = [e.to_json() for e in self.sdists] + list(self.unreadable_sdists)
        if sdists:  # absent until the first sdist is published (manifests from before sdists read the same)
            rows = ",\n".join("  " + json.dumps(f, sort_keys=True, ensure_ascii=False) for f in sdists)
            out += ',\n "sdists": [\n' + rows + "\n ]"
        return out + "\n}\n"

    def merge(self, wheels: list[WheelFile], url_for: Callable[[str], str], now: str) -> tuple[Manifest, list[Entry]]:
        """Add new wheels; returns the new manifest and the entries added.

        A wheel already published with the same sha256 is left as it is (same URL, same upload
        time); with a different sha256 it is refused (PublishConflict) and nothing changes.
        """
        existing = self.by_name()

        def entry(wheel: WheelFile) -> Entry:
            return Entry(
                filename=wheel.filename,
                variant=wheel.variant,
                version=wheel.version,
                platforms=wheel.platforms,
                url=url_for(wheel.filename),
                sha256=wheel.sha256,
                size=wheel.size,
                metadata_sha256=wheel.metadata_sha256,
                requires_python=wheel.requires_python,
                upload_time=now,
            )

        fix = "a new version (or build number), or yank the old file and publish under a new name."
        added = _append(existing, self.unreadable, wheels, entry, "build", fix)
        merged = dataclasses.replace(self, entries=tuple(existing[k] for k in sorted(existing)))
        return merged, added

    def merge_sdists(
        self, sdists: list[SdistFile], url_for: Callable[[str], str], now: str
    ) -> tuple[Manifest, list[SdistEntry]]:
        """Add new sdists, append-only as :meth:`merge` is for wheels."""
        existing = {e.filename: e for e in self.sdists}

        def entry(sd: SdistFile) -> SdistEntry:
            return SdistEntry(
                sd.filename, sd.version, url_for(sd.filename), sd.sha256, sd.size, sd.requires_python, now
            )

        fix = 'a new version (docs/release.md, "Version scheme").'
        added = _append(existing, self.unreadable_sdists, sdists, entry, "sdist", fix)
        return dataclasses.replace(self, sdists=tuple(existing[k] for k in sorted(existing))), added

    def yank(self, filename: str, reason: str) -> Manifest:
        """Mark a published file yanked (PEP 592); raises IndexSiteError for an unknown file."""
        sdists = {e.filename: e for e in self.sdists}
        if filename in sdists:
            sdists[filename] = dataclasses.replace(sdists[filename], yanked=reason)
            return dataclasses.replace(self, sdists=tuple(sdists[k] for k in sorted(sdists)))
        existing = self.by_name()
        if filename not in existing:
            close = difflib.get_close_matches(filename, list(existing) + list(sdists), n=1)
            hint = f" Perhaps you meant {close[0]!r}?" if close else ""
            raise IndexSiteError(f"Cannot yank {filename!r}: no such file in the manifest.{hint}")
        existing[filename] = dataclasses.replace(existing[filename], yanked=reason)
        return dataclasses.replace(self, entries=tuple(existing[k] for k in sorted(existing)))


_F = TypeVar("_F", WheelFile, SdistFile)


def _append(
    existing: dict[str, _E], unreadable: tuple, files: list[_F], entry: Callable[[_F], _E], what: str, fix: str
) -> list[_E]:
    """Add the files not yet published to ``existing`` (their entries from ``entry``); the entries added.
    Append-only: see :func:`_published`. ``unreadable``: the raw entries of this kind that did not validate."""
    raw_names = {r.get("filename") for r in unreadable if isinstance(r, dict)}
    added: list[_E] = []
    for f in files:
        if _published(existing.get(f.filename), raw_names, f, what, fix):
            continue
        existing[f.filename] = new = entry(f)
        added.append(new)
    return added


def _published(
    old: Union[Entry, SdistEntry, None], raw_names: set[object], new: Union[WheelFile, SdistFile], what: str, fix: str
) -> bool:
    """Whether ``new`` is published already (the same file: nothing to add). Publishing is append-only:
    PublishConflict for other contents under its name, or for a name whose manifest entry is unreadable."""
    if old is not None:
        if old.sha256 != new.sha256:
            raise PublishConflict(
                f"{new.filename!r} is already published with sha256 {old.sha256} (uploaded {old.upload_time}), "
                f"and {str(new.path)!r} has sha256 {new.sha256}. Publishing is append-only: a published file "
                f"is never replaced. Give the new {what} {fix}"
            )
        return True
    if new.filename in raw_names:
        raise PublishConflict(
            f"{new.filename!r} has an unreadable entry in the manifest; fix that entry by hand "
            "before publishing this file again"
        )
    return False


def _read_entries(
    raws: list[object], parse: Callable[[object], _E], where: str, problems: list[Problem]
) -> tuple[dict[str, _E], list[object]]:
    """(the entries that validate, by file name; the raw values of the others, kept verbatim). A second
    entry of a file name is kept raw too; each is reported as ``<where>[i])``."""
    entries: dict[str, _E] = {}
    unreadable: list[object] = []
    for i, raw in enumerate(raws):
        try:
            entry = parse(raw)
        except ValueError as exc:
            problems.append(Problem(f"{where}[{i}])", f"unreadable entry, kept as is but not listed: {exc}"))
            unreadable.append(raw)
            continue
        if entry.filename in entries:
            problems.append(Problem(f"{where}[{i}])", f"duplicate entry for {entry.filename!r}; kept as is"))
            unreadable.append(raw)
            continue
        entries[entry.filename] = entry
    return entries, unreadable


def parse_manifest(text: str, source: str) -> tuple[Manifest, list[Problem]]:
    """Parse a manifest; a document that is not a manifest at all raises ManifestError.

    Entries that do not validate are reported and kept verbatim (publishing never drops one).
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{source}: the manifest does not parse as JSON ({exc}). It lists every wheel ever published, "
            "so the site is not rebuilt without it: restore it (e.g. from the published site) and retry."
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise ManifestError(f"{source}: not an index_site manifest (expected an object with a 'files' list)")
    if doc.get("format") != MANIFEST_FORMAT:
        raise ManifestError(
            f"{source}: unsupported manifest format {doc.get('format')!r} (this index_site reads format "
            f"{MANIFEST_FORMAT})"
        )
    if doc.get("project") != contract.PROJECT_NAME:
        raise ManifestError(f"{source}: manifest of project {doc.get('project')!r}, expected {contract.PROJECT_NAME!r}")
    problems: list[Problem] = []
    entries, unreadable = _read_entries(doc["files"], Entry.from_json, f"{source} (files", problems)
    site_url = doc.get("site_url")
    if site_url is not None and not isinstance(site_url, str):
        problems.append(Problem(source, f"'site_url' is not a string, ignored: {site_url!r}"))
        site_url = None
    raw_sdists = doc.get("sdists", [])
    if not isinstance(raw_sdists, list):
        raise ManifestError(f"{source}: 'sdists' must be a list of sdist entries, got {type(raw_sdists).__name__}")
    sdists, bad_sdists = _read_entries(raw_sdists, SdistEntry.from_json, f"{source} (sdists", problems)
    return Manifest(
        tuple(entries[k] for k in sorted(entries)),
        tuple(unreadable),
        site_url,
        tuple(sdists[k] for k in sorted(sdists)),
        tuple(bad_sdists),
    ), problems


def load_manifest(path: Path) -> tuple[Manifest, list[Problem]]:
    """Load a manifest file; a missing file is an empty manifest."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Manifest(), []
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{str(path)!r}: cannot read the manifest ({exc})") from None
    return parse_manifest(text, str(path))
