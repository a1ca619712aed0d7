package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// ParseGuestExec reads the pretty JSON printed by `qm guest exec` (see
// docs/proxmox.md): `exitcode`, `exited`, `out-data`, `err-data`, `out-truncated`,
// `err-truncated`, `signal`, booleans printed as 1/0 and keys omitted when
// empty. qm itself exits 0 even when the guest command failed, so the exit
// code here is the only true one.
//
// The timeout form `{"pid": N}` yields an error matching ErrGuestTimeout and
// context.DeadlineExceeded. A command killed by a signal gets exit code
// 128+signal, as a shell would report it.
func ParseGuestExec(data []byte) (Result, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return Result{}, fmt.Errorf("%w: answer is not a JSON object: %w", ErrGuestExec, err)
	}
	if fields == nil {
		return Result{}, fmt.Errorf("%w: answer is JSON null", ErrGuestExec)
	}

	_, hasExited := fields["exited"]
	if pidRaw, ok := fields["pid"]; ok && !hasExited {
		pid, err := jsonInt(pidRaw)
		if err != nil {
			return Result{}, fmt.Errorf("%w: pid: %w", ErrGuestExec, err)
		}
		return Result{}, &guestTimeoutError{pid: pid}
	}
	if !hasExited {
		return Result{}, fmt.Errorf("%w: answer has neither `exited` nor `pid`", ErrGuestExec)
	}
	exited, err := jsonFlag(fields["exited"])
	if err != nil {
		return Result{}, fmt.Errorf("%w: exited: %w", ErrGuestExec, err)
	}
	if !exited {
		return Result{}, fmt.Errorf("%w: guest command has not exited", ErrGuestExec)
	}

	var res Result
	switch {
	case fields["exitcode"] != nil:
		if res.ExitCode, err = jsonInt(fields["exitcode"]); err != nil {
			return Result{}, fmt.Errorf("%w: exitcode: %w", ErrGuestExec, err)
		}
	case fields["signal"] != nil:
		sig, err := jsonInt(fields["signal"])
		if err != nil {
			return Result{}, fmt.Errorf("%w: signal: %w", ErrGuestExec, err)
		}
		res.ExitCode = 128 + sig
	default:
		return Result{}, fmt.Errorf("%w: guest command exited without an exit code or signal", ErrGuestExec)
	}

	for _, f := range []struct {
		key string
		dst *[]byte
	}{{"out-data", &res.Stdout}, {"err-data", &res.Stderr}} {
		raw, ok := fields[f.key]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Result{}, fmt.Errorf("%w: %s: %w", ErrGuestExec, f.key, err)
		}
		*f.dst = []byte(s)
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"out-truncated", &res.StdoutTruncated}, {"err-truncated", &res.StderrTruncated}} {
		raw, ok := fields[f.key]
		if !ok {
			continue
		}
		if *f.dst, err = jsonFlag(raw); err != nil {
			return Result{}, fmt.Errorf("%w: %s: %w", ErrGuestExec, f.key, err)
		}
	}
	return res, nil
}

// jsonInt accepts a JSON integer (qm prints numbers; a string form is
// accepted too, as older Proxmox versions stringify some numbers).
func jsonInt(raw json.RawMessage) (int, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.Atoi(x.String())
		if err != nil {
			return 0, fmt.Errorf("not an integer: %s", x)
		}
		return n, nil
	case string:
		n, err := strconv.Atoi(x)
		if err != nil {
			return 0, fmt.Errorf("not an integer: %q", x)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("not an integer: %s", raw)
	}
}

// jsonFlag accepts qm's 1/0 booleans and real JSON booleans.
func jsonFlag(raw json.RawMessage) (bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, err
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case float64:
		switch x {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
	}
	return false, fmt.Errorf("not a boolean: %s", raw)
}
