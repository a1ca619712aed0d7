package notifytarget_test

import "github.com/oikos-hq/oikos/api/internal/notifytest"

// The shared test support, under the names these tests use.
var (
	newReceiver = notifytest.NewReceiver
	decode      = notifytest.Decode
)
