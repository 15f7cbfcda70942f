# LibSoftmax's tests: Float32/Float16 against a Float64 reference on fresh random inputs (seed
# printed), dropout consistency and reproducibility, errors; CuArray tests when CUDA.jl finds a
# GPU and the library has its CUDA backend.
#
#   SOFTMAX_LIBRARY=/path/to/libsoftmax.so julia --project=bindings/julia/LibSoftmax -e 'using Pkg; Pkg.test()'
#
# NOT RUN on the project's build machines: no Julia toolchain can be installed there.
using LibSoftmax
using Random
using Test

const SEED = haskey(ENV, "SOFTMAX_TEST_SEED") ? parse(UInt64, ENV["SOFTMAX_TEST_SEED"]) : rand(RandomDevice(), UInt64)
println("random inputs from seed $SEED (SOFTMAX_TEST_SEED=$SEED repeats them)")
const RNG = Xoshiro(SEED)

# Softmax of each column in Float64: the column is the C row.
function reference(x::AbstractMatrix; log=false)
    x64 = Float64.(x)
    m = maximum(x64; dims=1)
    s = sum(exp.(x64 .- m); dims=1)
    return log ? x64 .- m .- Base.log.(s) : exp.(x64 .- m) ./ s
end
reference(x::AbstractVector; log=false) = vec(reference(reshape(x, :, 1); log))

# The C++ suites' tolerance (tests/common/reference.h) plus fp16's subnormal spacing.
function tolerance(::Type{T}, want, log, cols) where {T}
    storage, floor = T === Float32 ? (2.0^-24, 0.0) : (2.0^-11, 2.0^-24)
    arith = 1e-6 * (1 + log2(cols + 1) / 8)
    return abs(want) * (storage + arith) + floor + (log ? arith * (1 + abs(want)) : 1e-30)
end

function close_enough(y::AbstractArray{T}, want; log=false) where {T}
    cols = size(want, 1)
    return all(abs(Float64(g) - w) <= tolerance(T, w, log, cols) for (g, w) in zip(y, want))
end

randx(::Type{T}, dims...) where {T} = T.(16 .* rand(RNG, Float32, dims...) .- 8)

@testset "LibSoftmax (libsoftmax $(libsoftmax_version()), seed $SEED)" begin
    @testset "softmax over columns, $T, log=$log" for T in (Float32, Float16), log in (false, true)
        for (cols, rows) in ((1, 1), (7, 3), (1000, 17), (40_000, 2), (33, 257))
            x = randx(T, cols, rows)
            y = fill(T(NaN), cols, rows)
            softmax!(y, x; log)
            @test close_enough(y, reference(Float64.(x); log); log)
        end
    end

    @testset "allocating, vector and in-place forms" begin
        x = randx(Float32, 300, 5)
        @test close_enough(softmax(x), reference(x))
        @test close_enough(logsoftmax(x), reference(x; log=true); log=true)
        v = randx(Float32, 4097)
        @test close_enough(softmax(v), reference(v))
        z = copy(x)
        softmax!(z, z)
        @test close_enough(z, reference(x))
    end

    @testset "dropout" begin
        x = randx(Float32, 700, 37)
        p = 0.25
        mask = fill(0xAA, size(x))
        y = softmax_dropout!(similar(x), x, p, 1234, 7; mask)
        @test all(in((0x00, 0x01)), mask)
        @test all(y[mask .== 0] .== 0)
        kept = mask .== 1
        want = reference(x) ./ (1 - p)
        @test all(abs.(Float64.(y[kept]) .- want[kept]) .<= 2 .* tolerance.(Float32, want[kept], false, 700))
        n = length(x)
        @test abs(count(kept) - (1 - p) * n) < 6 * sqrt(n * p * (1 - p))

        y1, m1 = softmax_dropout(x, 0.1, 42, 3; return_mask=true)
        y2, m2 = softmax_dropout(x, 0.1, 42, 3; return_mask=true)
        @test m1 == m2 && reinterpret(UInt32, y1) == reinterpret(UInt32, y2)
        for t in (1, 2, 3)
            @test softmax_dropout(x, 0.1, 42, 3; return_mask=true, num_threads=t)[2] == m1
        end
        # The mask is a function of the linear index, not of the shape.
        @test softmax_dropout(vec(x), 0.1, 42, 3; return_mask=true)[2] == vec(m1)
        @test softmax_dropout(x, 0.1, 43, 3; return_mask=true)[2] != m1
        @test all(softmax_dropout(x, 1.0, 5; return_mask=true)[2] .== 0)
        @test close_enough(softmax_dropout(x, 0.0, 5), reference(x))
    end

    @testset "errors" begin
        x = ones(Float32, 4, 2)
        e = try softmax_dropout(x, 1.5, 1) catch err err end
        @test e isa SoftmaxError
        @test e.name == "SOFTMAX_STATUS_INVALID_PROBABILITY"
        @test occursin("got 1.5", e.message)
        y = fill(Float32(NaN), 4, 2)
        @test_throws SoftmaxError softmax_dropout!(y, x, NaN, 1)
        @test all(isnan, y)  # nothing written on failure
        e = try softmax(zeros(Float32, 0, 3)) catch err err end
        @test e isa SoftmaxError && e.message == "cols must be > 0, got 0"
        @test_throws SoftmaxError softmax(x; num_threads=-1)
        @test_throws DimensionMismatch softmax!(zeros(Float32, 2, 4), x)
        @test_throws DimensionMismatch softmax_dropout!(similar(x), x, 0.5, 1; mask=zeros(UInt8, 3))
        @test_throws ArgumentError softmax(x; backend=:gpu)
        @test_throws MethodError softmax(zeros(Float64, 4, 2))      # Float64 is not stored
        @test_throws MethodError softmax(zeros(Float32, 2, 2, 2))   # only vectors and matrices
        @test_throws MethodError softmax!(zeros(Float32, 4, 2)', x') # adjoint: not contiguous
        if !backend_available(:cuda)
            e = try softmax(x; backend=:cuda) catch err err end
            @test e isa SoftmaxError && e.name == "SOFTMAX_STATUS_BACKEND_UNAVAILABLE"
        end
    end
end

# CuArray tests: need CUDA.jl in the active environment (it is not a test dependency, so that
# Pkg.test() works on machines without it), a functional GPU and a CUDA-built libsoftmax. Loaded
# at top level so that the extension's methods are visible to the included tests.
const HAVE_CUDA_JL = try
    @eval using CUDA
    true
catch
    false
end
if HAVE_CUDA_JL && CUDA.functional() && backend_available(:cuda)
    include("cuda.jl")
else
    @info "CuArray tests skipped: need CUDA.jl, a functional GPU and libsoftmax built with CUDA"
end
