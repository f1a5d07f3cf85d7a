# Augmenting declarations for conv_resync.py: a link of the conversation's chain of
# extension types (attributes: conv_release.pxd).
from kwsniff.kafka.conv_orphans cimport OrphanHandling

cdef class ResyncChecks(OrphanHandling):
    pass
