package writeback

import "syscall"

// oNoFollow: never write through a final symlink.
const oNoFollow = syscall.O_NOFOLLOW
