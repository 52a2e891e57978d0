"""Light provider registry: ids, versions and what each provider claims.

Only names and cheap predicates live here so the policy commands (`why`,
`scopes`) can consult providers without importing parsers or stemmers; the
parsing side of `okf-markdown` is `ctindex.providers.okf_markdown`.
"""

from __future__ import annotations

from typing import NamedTuple


class ProviderInfo(NamedTuple):  # not a dataclass: imported by every search
    id: str
    version: int
    tokenizer_version: int
    extensions: tuple[str, ...]  # claimed file-name suffixes, case-sensitive
    reserved_names: tuple[str, ...]  # names refused at any level even with a claimed suffix
    default_include: tuple[str, ...]
    index_dir: str  # project-relative storage folder (hard-excluded)

    def claims_extension(self, name: str) -> bool:
        """True when the file name ends with one of the provider's suffixes."""
        return name.endswith(self.extensions)

    def refuses_name(self, name: str) -> bool:
        """True for reserved names the provider will never index."""
        return name in self.reserved_names

    def versions(self) -> dict[str, int | str]:
        """What a manifest records; a change forces a rebuild (spec §3)."""
        return {"id": self.id, "version": self.version, "tokenizer_version": self.tokenizer_version}


OKF_MARKDOWN = ProviderInfo(
    id="okf-markdown",
    version=1,
    # 2: per-field statistics and exact-match keys for BM25F ranking
    # (docs/search.md); an index of version 1 is rebuilt (spec §3).
    tokenizer_version=2,
    extensions=(".md",),
    reserved_names=("index.md", "log.md"),
    default_include=("**/*.md",),
    index_dir=".ct/okf",
)

PROVIDERS: dict[str, ProviderInfo] = {OKF_MARKDOWN.id: OKF_MARKDOWN}


def get_provider(provider_id: str) -> ProviderInfo | None:
    return PROVIDERS.get(provider_id)


def any_claims(name: str) -> bool:
    """True when some registered provider claims this file name's suffix."""
    return any(p.claims_extension(name) for p in PROVIDERS.values())
