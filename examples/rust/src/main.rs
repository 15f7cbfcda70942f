// SPDX-License-Identifier: Apache-2.0
//! libsoftmax from Rust: softmax and log-softmax of a small matrix, its gradient, a fused
//! softmax+dropout with its mask and gradient, and the error a bad call returns. Exits non-zero
//! if any result is wrong.

use softmax::{Dropout, Options, Status};

fn main() {
    if let Err(why) = run() {
        eprintln!("Rust example FAILED: {}", why);
        std::process::exit(1);
    }
    println!("libsoftmax {}: Rust example OK", softmax::version());
}

fn run() -> Result<(), String> {
    let (rows, cols) = (3, 4);
    let x = vec![
        1.0f32, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1000.0,
    ];
    let mut y = vec![0.0f32; rows * cols];

    softmax::rows(&x, &mut y, rows, cols, &Options::default()).map_err(|e| e.to_string())?;
    println!("softmax(x):");
    for row in y.chunks(cols) {
        println!("  {:?}", row);
        let sum: f32 = row.iter().sum();
        if (sum - 1.0).abs() > 1e-5 {
            return Err(format!("a row sums to {}", sum));
        }
    }

    // The gradient of sum(w * softmax(x)) with respect to x, from the forward's output y:
    // dx = y * (w - sum(w * y)), so here dx[c] = y[c] * ([c == 0] - y[0]).
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| if i % cols == 0 { 1.0 } else { 0.0 })
        .collect();
    let mut dx = vec![0.0f32; rows * cols];
    softmax::rows_backward(&y, &w, &mut dx, rows, cols, &Options::default())
        .map_err(|e| e.to_string())?;
    println!("d sum(w * softmax(x)) / dx row 0: {:?}", &dx[..cols]);
    for r in 0..rows {
        let y0 = y[r * cols];
        for c in 0..cols {
            let want = y[r * cols + c] * (w[r * cols + c] - y0);
            if (dx[r * cols + c] - want).abs() > 1e-6 {
                return Err(format!(
                    "dx[{}][{}] = {}, want {}",
                    r,
                    c,
                    dx[r * cols + c],
                    want
                ));
            }
        }
    }

    let mut logp = x.clone();
    softmax::rows_in_place(&mut logp, rows, cols, &Options::default().log(true))
        .map_err(|e| e.to_string())?;
    println!("log_softmax(x) row 0: {:?}", &logp[..cols]);

    let mut keep = vec![0u8; rows * cols];
    let d = Dropout {
        p: 0.5,
        seed: 42,
        offset: 0,
    };
    softmax::dropout(
        &x,
        &mut y,
        Some(&mut keep),
        rows,
        cols,
        d,
        &Options::default(),
    )
    .map_err(|e| e.to_string())?;
    println!("dropout p=0.5 mask: {:?}", keep);
    if y.iter().zip(&keep).any(|(&v, &k)| k == 0 && v != 0.0) {
        return Err("a dropped element is not zero".to_string());
    }

    // Its gradient recomputes softmax and mask from x and (p, seed, offset): nothing is kept.
    let mut dx_drop = vec![0.0f32; rows * cols];
    softmax::dropout_backward(&x, &w, &mut dx_drop, rows, cols, d, &Options::default())
        .map_err(|e| e.to_string())?;
    println!("dropout gradient row 0: {:?}", &dx_drop[..cols]);
    if dx_drop.iter().any(|v| !v.is_finite()) {
        return Err("the dropout gradient is not finite".to_string());
    }

    // A bad call is an Err with the library's status and message.
    let bad = Dropout { p: 1.5, ..d };
    match softmax::dropout(&x, &mut y, None, rows, cols, bad, &Options::default()) {
        Err(e) if e.status() == Status::InvalidProbability => {
            println!("p = 1.5 refused as expected: {}", e)
        }
        other => return Err(format!("p = 1.5 gave {:?}", other)),
    }
    Ok(())
}
