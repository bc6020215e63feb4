//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs a program as owner (nil: as this process).
func sysProcAttr(owner *account) *syscall.SysProcAttr {
	if owner == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid)}}
}
