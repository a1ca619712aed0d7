package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/oikos-hq/oikos/shared/duration"
)

// Fault is what can go wrong with a host or a guest. The zero Fault is a healthy machine.
//
// Host faults: Down closes the listener and every open connection (a dial is refused at
// once); Refusing fails SSH authentication; ChangedHostKey serves a different host key;
// Delay, Hang and DisconnectMidOutput apply to every command: to the command of each SSH
// session and, in a session running a shell that reads its commands from the session (a
// probe shell), again to each line it reads. Setting Down, Refusing or
// ChangedHostKey also drops the host's open connections, as the reboot or reinstall behind
// them would, so the next command has to connect again and meets the fault.
//
// Guest faults apply to commands that enter the guest (pct exec, qm guest exec) and to its
// HTTP routes: Delay, Hang, DisconnectMidOutput (of the host's SSH connection carrying
// them) and GuestAgentDown (qm guest exec answers "QEMU guest agent is not running").
type Fault struct {
	Down                bool
	Refusing            bool
	Delay               time.Duration
	Hang                bool
	DisconnectMidOutput bool
	ChangedHostKey      bool
	GuestAgentDown      bool
	// Flap makes a running guest look stopped to every other invocation of the same Proxmox
	// command (pct status, pct exec …, qm status, qm guest exec …): each probe alternates
	// between up and down, run after run, which a failure threshold of 2 never alerts on.
	// On a host it applies to every guest of the host.
	Flap bool
}

// IsZero reports whether the fault is healthy.
func (f Fault) IsZero() bool { return f == Fault{} }

// faultJSON is the wire form of a Fault: the delay is a Go duration string ("250ms").
type faultJSON struct {
	Down                bool   `json:"down,omitempty"`
	Refusing            bool   `json:"refusing,omitempty"`
	Delay               string `json:"delay,omitempty"`
	Hang                bool   `json:"hang,omitempty"`
	DisconnectMidOutput bool   `json:"disconnect_mid_output,omitempty"`
	ChangedHostKey      bool   `json:"changed_host_key,omitempty"`
	GuestAgentDown      bool   `json:"guest_agent_down,omitempty"`
	Flap                bool   `json:"flap,omitempty"`
}

// MarshalJSON renders the fault with snake_case keys and the delay as a duration string.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Down: f.Down, Refusing: f.Refusing, Hang: f.Hang, DisconnectMidOutput: f.DisconnectMidOutput,
		ChangedHostKey: f.ChangedHostKey, GuestAgentDown: f.GuestAgentDown, Flap: f.Flap}
	if f.Delay > 0 {
		j.Delay = f.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var d time.Duration
	if j.Delay != "" {
		var err error
		if d, err = duration.ParseNonNegative(j.Delay); err != nil {
			return fmt.Errorf("delay: %w", err)
		}
	}
	*f = Fault{Down: j.Down, Refusing: j.Refusing, Delay: d, Hang: j.Hang, DisconnectMidOutput: j.DisconnectMidOutput,
		ChangedHostKey: j.ChangedHostKey, GuestAgentDown: j.GuestAgentDown, Flap: j.Flap}
	return nil
}

// Wait applies Delay and Hang before a command; false means ctx ended first.
func (f Fault) Wait(ctx context.Context) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	if f.Hang {
		<-ctx.Done()
		return false
	}
	return ctx.Err() == nil
}

// dropKey carries the current connection's drop function to the programs that enter a guest
// (pct exec, qm guest exec), which need it for the guest's DisconnectMidOutput fault.
type dropKey struct{}

// WithDrop returns ctx carrying drop, the function that closes the SSH connection running
// the command.
func WithDrop(ctx context.Context, drop func()) context.Context {
	return context.WithValue(ctx, dropKey{}, drop)
}

// DropConn closes the SSH connection running the command in ctx, if any.
func DropConn(ctx context.Context) {
	if f, ok := ctx.Value(dropKey{}).(func()); ok {
		f()
	}
}

// WriteHalfAndDrop sends the first half of out (at least one byte of a non-empty output) and
// then closes the TCP connection under the session.
func WriteHalfAndDrop(w io.Writer, out []byte, drop func()) {
	n := len(out) / 2
	if n == 0 && len(out) > 0 {
		n = 1
	}
	_, _ = w.Write(out[:n])
	drop()
}
