//go:build unix

package worker

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// processGroup is the process group of a command started by Command: sh is
// its leader, and what sh starts belongs to it unless it moves itself out.
type processGroup struct {
	cmd        *exec.Cmd
	terminated time.Time // when SIGTERM was sent; zero: not yet
}

func inOwnProcessGroup(cmd *exec.Cmd) *processGroup {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return &processGroup{cmd: cmd}
}

// terminate sends SIGTERM to the whole group; it is the command's Cancel.
func (g *processGroup) terminate() error {
	g.terminated = time.Now()
	err := syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// kill waits, up to grace after SIGTERM, for the group to be gone, then
// sends it SIGKILL. The group's id cannot be reused while a member is alive,
// so the signals reach no one else.
func (g *processGroup) kill(grace time.Duration) {
	if g.terminated.IsZero() {
		_ = g.terminate()
	}
	pgid := -g.cmd.Process.Pid
	deadline := g.terminated.Add(grace)
	for time.Now().Before(deadline) {
		if errors.Is(syscall.Kill(pgid, 0), syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
}
