#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| klog::fuzz::sasl(data));
