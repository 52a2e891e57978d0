"""Light provider registry: ids, versions and what each provider claims.

Only names and cheap predicates live here so the policy commands (`why`,
`scopes`) and every query can consult providers without importing parsers or
stemmers. The heavy side of a provider (parse, analyse, query terms: the
``Provider`` interface of ctindex/providers/base.py) is the module its
``ProviderInfo.module`` names, imported by ``load`` on first use. This is the
one place that names a provider module (docs/provider.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ctindex.providers.base import Provider


class ProviderInfo(NamedTuple):  # not a dataclass: imported by every search
    id: str
    version: int
    tokenizer_version: int
    extensions: tuple[str, ...]  # claimed file-name suffixes, case-sensitive
    reserved_names: tuple[str, ...]  # names refused at any level even with a claimed suffix
    default_include: tuple[str, ...]
    index_dir: str  # project-relative storage folder (hard-excluded)
    module: str  # the module whose PROVIDER implements providers.base.Provider
    # Root detection when no scopes are configured (ctindex/policy/plan.py):
    # the topmost folders, at most `root_depth` below the project root, that
    # hold a regular file of this name; None: the provider derives no scopes.
    root_marker: str | None = None
    root_depth: int = 0

    def claims_extension(self, name: str) -> bool:
        """True when the file name ends with one of the provider's suffixes."""
        return name.endswith(self.extensions)

    def refuses_name(self, name: str) -> bool:
        """True for reserved names the provider will never index."""
        return name in self.reserved_names

    def versions(self) -> dict[str, int | str]:
        """What a manifest records; a change forces a rebuild."""
        return {"id": self.id, "version": self.version, "tokenizer_version": self.tokenizer_version}


OKF_MARKDOWN = ProviderInfo(
    id="okf-markdown",
    version=1,
    # 2: per-field statistics and exact-match keys for BM25F ranking
    # (docs/search.md); 3: accent and compatibility folding
    # (ctindex/providers/folding.py). An index of an older version is rebuilt.
    tokenizer_version=3,
    extensions=(".md",),
    reserved_names=("index.md", "log.md"),
    default_include=("**/*.md",),
    index_dir=".ct/okf",
    module="ctindex.providers.okf_markdown",
    root_marker="index.md",  # docs/decisions/policy.md: okf/bundles/<name>/index.md
    root_depth=3,
)

PROVIDERS: dict[str, ProviderInfo] = {OKF_MARKDOWN.id: OKF_MARKDOWN}
# The provider whose folder (`index_dir`) the index is: the manifest records
# its versions, queries are analysed its way, and without configured scopes
# the plan derives scopes from its root marker.
INDEX_PROVIDER = OKF_MARKDOWN.id
_LOADED: dict[str, Provider] = {}


def load(provider_id: str) -> Provider:
    """The provider registered under `provider_id`, its module imported on
    first use. KeyError for an id the registry does not hold (the policy
    validates scope providers long before anything is parsed)."""
    found = _LOADED.get(provider_id)
    if found is None:
        import importlib

        info = PROVIDERS[provider_id]
        found = importlib.import_module(info.module).PROVIDER
        _LOADED[provider_id] = found
    return found


def register(info: ProviderInfo, provider: Provider | None = None) -> None:
    """Add a provider (`provider`: its implementation, else `info.module` is
    imported on first use). Registering is process-wide; tests undo it with
    `unregister`."""
    PROVIDERS[info.id] = info
    _LOADED.pop(info.id, None)
    if provider is not None:
        _LOADED[info.id] = provider


def unregister(provider_id: str) -> None:
    PROVIDERS.pop(provider_id, None)
    _LOADED.pop(provider_id, None)


def any_claims(name: str) -> bool:
    """True when some registered provider claims this file name's suffix."""
    return any(p.claims_extension(name) for p in PROVIDERS.values())
