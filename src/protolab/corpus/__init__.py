"""Page corpus: synthetic replicas of 001 Table I, generated corpora shaped like 002 Table 4.1,
HAR import, and manifest validation (docs/corpus.md, docs/manifest.md)."""

from protolab.corpus.errors import CorpusError, HarError, ManifestError
from protolab.corpus.manifest import load_manifest, validate_manifest, write_manifests
from protolab.corpus.table1 import DEMO_PAGES, SITES, get_site, site_manifest

__all__ = [
    "DEMO_PAGES",
    "SITES",
    "CorpusError",
    "HarError",
    "ManifestError",
    "get_site",
    "load_manifest",
    "site_manifest",
    "validate_manifest",
    "write_manifests",
]
