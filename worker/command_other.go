//go:build !unix

package worker

import (
	"os/exec"
	"time"
)

// processGroup stands for the command's process alone where there are no
// process groups: only sh itself is stopped.
type processGroup struct{ cmd *exec.Cmd }

func inOwnProcessGroup(cmd *exec.Cmd) *processGroup { return &processGroup{cmd: cmd} }

func (g *processGroup) terminate() error { return g.cmd.Process.Kill() }

func (g *processGroup) kill(time.Duration) {}
