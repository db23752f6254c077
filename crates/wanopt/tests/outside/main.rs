//! The wanopt binary tested from outside: each module starts real nodes
//! (edge, core, lab) as processes and talks to them as a user would, over
//! sockets, the control API and the command line. One test binary rather
//! than one per module: each binary links the whole of wanopt, and linking
//! dozens of them was most of the test command's build. `scripts/run-tests.py`
//! still runs each module as its own job (`outside MODULE::`), so their
//! schedule, their lab prefixes and the modules run alone are as before.

mod common;

mod bond;
mod classes;
mod cli;
mod cluster;
mod configured_peers;
mod control;
mod control_plane;
mod dist_files;
mod docs;
mod duplicate;
mod fec;
mod fec_calls;
mod flood;
mod idle_flows;
mod intercept;
mod isolation;
mod lab_bond;
mod lab_experiments;
mod lab_link2;
mod lab_realtime;
mod lab_sites;
mod lab_why;
mod limits;
mod parity;
mod path_tools;
mod paths;
mod pauses;
mod probe;
mod reach;
mod readme;
mod reduce;
mod sites;
mod spread_fec;
mod tunnel;
mod udp;
mod why;
