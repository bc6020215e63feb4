//go:build !unix

package pgtest

import "syscall"

// sysProcAttr runs a program as this process: only Unix has root to avoid.
func sysProcAttr(*account) *syscall.SysProcAttr { return nil }
