# Augmenting declarations for conv_orphans.py: a link of the conversation's chain of
# extension types (attributes: conv_release.pxd).
from kwsniff.kafka.conv_inorder cimport InOrderPairing

cdef class OrphanHandling(InOrderPairing):
    pass
