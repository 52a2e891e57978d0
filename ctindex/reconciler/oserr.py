"""How the reconciler classifies OSErrors (shared by the walk and the hasher)."""

import errno

# The entry is not there (any more) as the kind we expected: the truth is "gone".
GONE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
# We may not look: previous knowledge is kept and the key is reported.
DENIED = frozenset({errno.EACCES, errno.EPERM})
