//! `.mag` files in the facade's object model.

use zt_container::{Error, Result, Source};

use crate::reader::{Limits, Reader};

pub(crate) fn open(_source: Source, _limits: &Limits) -> Result<Reader> {
    Err(Error::unsupported(".mag files are not readable yet"))
}
