package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseGuestExec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    Result
		wantErr []error
		errHas  string
	}{
		{
			name: "PROXMOX.md example",
			in:   "{\n   \"exitcode\" : 0,\n   \"exited\" : 1,\n   \"out-data\" : \"website-edge\\n\",\n   \"out-truncated\" : 0\n}\n",
			want: Result{ExitCode: 0, Stdout: []byte("website-edge\n")},
		},
		{
			name: "failing command with err-data (qm itself exited 0)",
			in: "{\n   \"err-data\" : \"ls: cannot access '/nope': No such file or directory\\n\",\n   \"exitcode\" : 2,\n" +
				"   \"exited\" : 1\n}\n",
			want: Result{ExitCode: 2, Stderr: []byte("ls: cannot access '/nope': No such file or directory\n")},
		},
		{
			name: "all keys, truncated flags set",
			in: "{\n   \"err-data\" : \"e\",\n   \"err-truncated\" : 1,\n   \"exitcode\" : 1,\n   \"exited\" : 1,\n" +
				"   \"out-data\" : \"o\",\n   \"out-truncated\" : 1\n}\n",
			want: Result{ExitCode: 1, Stdout: []byte("o"), Stderr: []byte("e"), StdoutTruncated: true, StderrTruncated: true},
		},
		{
			name: "JSON booleans accepted too",
			in:   `{"exitcode": 0, "exited": true, "out-truncated": false}`,
			want: Result{},
		},
		{
			name: "escapes and control characters decoded",
			in:   `{"exitcode":0,"exited":1,"out-data":"q\" b\\ t\t nul\u0000 é"}`,
			want: Result{Stdout: []byte("q\" b\\ t\t nul\x00 é")},
		},
		{
			name: "killed by a signal",
			in:   "{\n   \"exited\" : 1,\n   \"signal\" : 9\n}\n",
			want: Result{ExitCode: 137},
		},
		{
			name:    "timeout form",
			in:      "{\n   \"pid\" : 4242\n}\n",
			wantErr: []error{ErrGuestTimeout, context.DeadlineExceeded},
			errHas:  "4242",
		},
		{
			name:    "not exited",
			in:      `{"exited": 0, "pid": 7}`,
			wantErr: []error{ErrGuestExec},
			errHas:  "not exited",
		},
		{
			name:    "exited without exit code",
			in:      `{"exited": 1}`,
			wantErr: []error{ErrGuestExec},
			errHas:  "without an exit code",
		},
		{
			name:    "qm's plain-text error is not JSON",
			in:      "QEMU guest agent is not running\n",
			wantErr: []error{ErrGuestExec},
		},
		{name: "empty", in: "", wantErr: []error{ErrGuestExec}},
		{name: "null", in: "null", wantErr: []error{ErrGuestExec}},
		{name: "bad exitcode", in: `{"exited":1,"exitcode":"x"}`, wantErr: []error{ErrGuestExec}, errHas: "exitcode"},
		{name: "bad flag", in: `{"exited":2,"exitcode":0}`, wantErr: []error{ErrGuestExec}, errHas: "exited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseGuestExec([]byte(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !errors.Is(err, w) {
						t.Errorf("error %q does not match %v", err, w)
					}
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not mention %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ExitCode != tt.want.ExitCode || string(got.Stdout) != string(tt.want.Stdout) ||
				string(got.Stderr) != string(tt.want.Stderr) || got.StdoutTruncated != tt.want.StdoutTruncated ||
				got.StderrTruncated != tt.want.StderrTruncated {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
