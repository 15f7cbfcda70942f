# CuArray methods (LibSoftmaxCUDAExt); included by runtests.jl only when CUDA.jl, a GPU and the
# library's CUDA backend are all present.
@testset "CuArray (seed $SEED)" begin
    for T in (Float32, Float16), (cols, rows) in ((1000, 64), (70_000, 3), (128, 4096))
        x = randx(T, cols, rows)
        d = CUDA.CuArray(x)
        @test close_enough(Array(softmax(d)), reference(Float64.(x)))
        @test close_enough(Array(logsoftmax(d)), reference(Float64.(x); log=true); log=true)
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
        softmax!(z, z)
        CUDA.synchronize(s)
        @test close_enough(Array(z), reference(x))
    end
    e = try softmax(d; backend=:cpu) catch err err end
    @test e isa SoftmaxError && e.name == "SOFTMAX_STATUS_WRONG_MEMORY_SPACE"
end
