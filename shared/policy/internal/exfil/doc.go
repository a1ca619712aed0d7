// Package exfil is the principle that data leaving the machine needs an
// operator: the table of senders (HTTP clients, DNS lookups, stream tools,
// copies to a remote, mail, file-transfer scripts), what each sends, and
// whether what it sends is a credential store (then the command is
// destructive: a leaked secret cannot be taken back).
package exfil
