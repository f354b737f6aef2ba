//! mwp-host: the native host of mwp.
