package hostconnect

import "testing"

func TestCheckFingerprint(t *testing.T) {
	good := "SHA256:" + "uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"
	if err := CheckFingerprint(good); err != nil {
		t.Fatalf("%s: %v", good, err)
	}
	for _, bad := range []string{"", "SHA256:", "MD5:aa:bb", good + "=", "sha256:" + good[7:], good[:20]} {
		if CheckFingerprint(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if !Terminal(StatusAwaiting) || !Terminal(StatusFailed) || Terminal(StatusConnecting) || Terminal(StatusPending) {
		t.Error("Terminal")
	}
}
