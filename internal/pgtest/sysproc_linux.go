package pgtest

import "syscall"

// sysProcAttr runs a program as owner (nil: as this process), and has the
// kernel interrupt it (for postgres, a fast shutdown) if the thread that
// started it ends, so that a test process killed before Main stops its
// server does not leave the server running.
func sysProcAttr(owner *account) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT}
	if owner != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid)}
	}
	return attr
}
