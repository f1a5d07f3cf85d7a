# Augmenting declarations for conv_inorder.py: a link of the conversation's chain of
# extension types (attributes: conv_release.pxd).
from kwsniff.kafka.conv_release cimport ReleaseControl

cdef class InOrderPairing(ReleaseControl):
    pass
