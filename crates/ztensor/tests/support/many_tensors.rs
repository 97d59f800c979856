//! Files of many one-element tensors, for the tests that measure what a listing costs.

/// A `.safetensors` file of `n` one-element f32 tensors, tensor `i` named `name(i)`, in that
/// order in the data.
pub fn safetensors_of_scalars(n: usize, name: impl Fn(usize) -> String) -> Vec<u8> {
    let mut header = String::from("{");
    for i in 0..n {
        let start = i * 4;
        header.push_str(&format!(
            r#""{}":{{"dtype":"F32","shape":[1],"data_offsets":[{start},{}]}},"#,
            name(i),
            start + 4
        ));
    }
    header.pop();
    header.push('}');
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header.as_bytes());
    file.resize(file.len() + n * 4, 0);
    file
}
