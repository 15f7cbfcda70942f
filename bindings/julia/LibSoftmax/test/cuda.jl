# SPDX-License-Identifier: Apache-2.0
# CuArray methods (LibSoftmaxCUDAExt); included by runtests.jl only when CUDA.jl, a GPU and the
# library's CUDA backend are all present.
@testset "CuArray (seed $SEED)" begin
    for T in (Float32, Float16), (cols, rows) in ((1000, 64), (70_000, 3), (128, 4096))
        x = randx(T, cols, rows)
        d = CUDA.CuArray(x)
        @test close_enough(Array(rowsoftmax(d)), reference(Float64.(x)))
        @test close_enough(Array(rowlogsoftmax(d)), reference(Float64.(x); log=true); log=true)
    end
    x = randx(Float32, 1000, 64)
    d = CUDA.CuArray(x)
    yd, md = softmax_dropout(d, 0.1, 42, 3; return_mask=true)
    yh, mh = softmax_dropout(x, 0.1, 42, 3; return_mask=true)
    @test Array(md) == mh  # the same mask on the GPU and the CPU
    @test all(Array(yd)[mh .== 0] .== 0)
    # Work is queued on CUDA.jl's task-local stream: a fresh stream sees its own input.
    s = CUDA.CuStream()
    CUDA.stream!(s) do
        z = CUDA.CuArray(x)
        rowsoftmax!(z, z)
        CUDA.synchronize(s)
        @test close_enough(Array(z), reference(x))
    end
    dy = CUDA.CuArray(Float32.(2 .* rand(RNG, 1000, 64) .- 1))
    yd = rowsoftmax(d)
    @test backward_close(Array(softmax_backward(yd, dy)), Array(yd), Array(dy))
    @test Array(dropout_backward(d, dy, 0.1, 42, 3)) ≈ dropout_backward(x, Array(dy), 0.1, 42, 3)
    e = try rowsoftmax(d; backend=:cpu) catch err err end
    @test e isa SoftmaxError && e.name == "SOFTMAX_STATUS_WRONG_MEMORY_SPACE"
end
