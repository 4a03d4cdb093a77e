// Package nftnl programs one nftables table of the inet family over
// netlink from inside the process (Linux): no nft binary, no text handed
// to another program. The service proxy (proxy/nftables), pod hostPorts
// (cni/hostport) and pod egress masquerading (overlay/egress) each write
// their own table through it; the agent's status dump lists them with
// Describe.
//
// A Conn is a NETLINK_NETFILTER socket bound to the network namespace
// Open ran in, for one table whose name is a parameter. Callers describe
// what to write with knftables objects (Table, Chain, Rule, Set, Map,
// Element), used as plain descriptions, on a Tx: a Conn's Tx encodes each
// operation into nf_tables netlink messages as it is added, in one
// NFNL_MSG_BATCH_BEGIN … END batch that Run sends with one sendmsg; the
// kernel applies the batch as one transaction, all of it or none. Set
// elements go in bulk (as many per NEWSETELEM as its 16-bit element list
// takes), only the last message asks for an ack, and the socket's send
// buffer is sized to the batch, so a proxy sync of 30k messages is one
// sendmsg and one answer. An *Error names the object the kernel refused;
// IsNotFound tells a missing one.
//
// Rules are nft text from a small vocabulary, compiled by compileRule to
// the expressions nft 1.0.6 generates for the same text (read with nft
// --debug=netlink); anything else is refused, not guessed. Sets carry
// nft's userdata (typeof, comments), so `nft list` prints what netlink
// wrote as nft would have written it: each user's kernel tests write
// their table both ways and compare the listings.
//
// Listing is by GET dumps: object names (List, ListAll), set elements
// decoded by the set's type as the kernel holds it (ListElements), rules
// as handles and comments (ListRules: expressions are not read back).
//
// Interface is what cni/hostport and overlay/egress program through:
// a Conn, or any knftables.Interface made one by Knftables (knftables'
// stateful Fake in unit tests, or knftables.New — the nft binary — for a
// comparison in tests). The proxy keeps a transport of its own over a Conn
// or knftables.
//
// The expressions are marshalled by github.com/google/nftables' expr
// package; the batch, socket and dumps are our own, on
// golang.org/x/sys/unix (see proxy/nftables' documentation for why).
package nftnl
