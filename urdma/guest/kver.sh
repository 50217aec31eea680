#!/bin/sh
# Print the ABI of Debian's current kernel (e.g. 6.1.0-56-amd64): the
# version of the linux-headers-NN-amd64 package that linux-headers-amd64
# depends on, from the apt lists.  The module and the guest kernel both
# follow it; the running host kernel is irrelevant.
set -e
if [ -n "$URDMA_KVER" ]; then echo "$URDMA_KVER"; exit 0; fi
apt-cache depends linux-headers-amd64 2>/dev/null |
	sed -n 's/^ *Depends: linux-headers-\([0-9].*-amd64\)$/\1/p' | head -n 1
