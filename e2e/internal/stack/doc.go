// Package stack builds the in-process stack the e2e suites share (e2e/agent, e2e/chat): a
// test database, the api started through api/app.Start with its seeds, the lab simulator
// serving the seeded inventory over SSH with the scheduler's executor running gated
// executions on it, agents started through their composition root, and an api client.
//
// Nothing here is imported outside the e2e module's tests.
package stack
