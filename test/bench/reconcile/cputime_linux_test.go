package reconcile

import (
	"syscall"
	"unsafe"
)

// processCPU is the CPU time of the whole process so far, in ns
// (CLOCK_PROCESS_CPUTIME_ID: precise, unlike getrusage's ticks).
func processCPU() int64 {
	var ts syscall.Timespec
	const clockProcessCPUTime = 2
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// threadCPU is the CPU time of the calling thread so far, in ns
// (CLOCK_THREAD_CPUTIME_ID); the caller locks its goroutine to the thread.
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
