//! The API's codec: prost's, with small buffers. A lease stream carries a
//! few small messages over a long life, and one daemon holds thousands of
//! them: tonic's default buffers (8 KiB each way, from the stream's first
//! moment) were most of a held lease's memory.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Each stream's buffer, each way, at first: more than any message the
/// API carries but a very long name, for which it grows.
const BUFFER: usize = 1024;

/// How much a stream encodes before it yields (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

/// prost's codec with [`BUFFER`]-sized buffers; the generated services
/// and clients use it.
#[derive(Debug)]
pub struct LeanCodec<T, U>(PhantomData<fn() -> (T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec(PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(BufferSettings::new(BUFFER, YIELD_THRESHOLD))
    }
}
