// Package wire holds what every participant of Interlock's protocol needs
// and nothing more: the names of the streams, subjects and buckets of a
// deployment ([Names]), and connecting to NATS ([Connect]). It imports
// nats.go but not the NATS server, so clients (bots, tools, services) that
// use it do not carry a server inside.
package wire
