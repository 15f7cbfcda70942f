//! libsoftmax from Rust: softmax and log-softmax of a small matrix, a fused softmax+dropout with
//! its mask, and the error a bad call returns. Exits non-zero if any result is wrong.

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
